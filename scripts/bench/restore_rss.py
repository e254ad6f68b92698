"""Peak memory of `mcp-memory restore` on big session files.

    python scripts/bench/restore_rss.py [--mb 200] [--line-mb 150] [--dsn postgresql://…]

Writes an archive (a git repository, lines made with the archive's own format and hashes) holding
(a) one session whose jsonl is about --mb MB of ordinary messages and (b) one session with a single
line of --line-mb MB (far over the message limit: restore quarantines it), then runs `mcp-memory
restore` as a child process on each into an empty database and reports the peak RSS (VmHWM, Linux)
of that process and of the git processes it starts. Without --dsn a temporary embedded PostgreSQL
is started and stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import psutil
import psycopg
from psycopg.conninfo import make_conninfo

from mcp_memory.archive import gitrepo, layout
from mcp_memory.core.messages import payload_digest
from mcp_memory.store import embedded, migrate


def write_session(repo: Path, lines: int, content: str) -> str:
    sid = f"ses_{uuid.uuid4()}"
    now = datetime.now(UTC)
    with (repo / layout.session_path(sid)).open("w", encoding="utf-8") as f:
        for seq in range(1, lines + 1):
            payload = {"schema_version": 1, "role": "user" if seq % 2 else "assistant", "content": content}
            f.write(layout.message_line(session_id=sid, seq=seq, append_id=f"a-{seq}", payload=payload,
                                        created_at=now, payload_hash=payload_digest(payload)))
    meta = {"session_id": sid, "project_id": "bench", "agent_source": None, "title": "big", "meta": {},
            "parent_session_id": None, "fork_seq": None, "parent_snapshot_id": None, "created_by": None,
            "created_at": now}
    (repo / layout.meta_path(sid)).write_text(layout.meta_document(meta), encoding="utf-8")
    gitrepo.commit(repo, [layout.session_path(sid), layout.meta_path(sid)], f"bench session {sid}")
    return sid


def high_water(pid: int) -> float:
    """VmHWM (MB): the process's peak RSS since its exec. Not ru_maxrss, which on Linux also counts
    the parent's memory the child had before exec."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def watch(proc: subprocess.Popen, peaks: dict[str, float]) -> None:
    """Peak RSS (MB) of the restore process itself and of the git processes it runs."""
    me = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            peaks["restore"] = max(peaks["restore"], high_water(proc.pid))
            for child in me.children(recursive=True):
                peaks["git"] = max(peaks["git"], high_water(child.pid))
        except (psutil.Error, OSError):
            pass
        time.sleep(0.02)


def restore_rss(dsn: str, admin: str, repo: Path) -> tuple[dict[str, float], float, int]:
    """(peak RSS in MB of restore and of git, seconds, exit code) of one restore into a new empty,
    migrated database."""
    name = f"mm_restore_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    target = make_conninfo(dsn, dbname=name)
    try:
        migrate.migrate(target)
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "mcp_memory", "--dsn", target, "restore", "--from-archive",
                                 str(repo), "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        peaks = {"restore": 0.0, "git": 0.0}
        sampler = threading.Thread(target=watch, args=(proc, peaks), daemon=True)
        sampler.start()
        report = proc.stdout.read()
        proc.wait()
        sampler.join()
        seconds = time.perf_counter() - started
        summary = json.loads(report)
        print(f"  restored {summary['sessions']} session(s), {summary['messages']} message(s), "
              f"{len(summary['bad_lines'])} bad line(s)")
        return peaks, seconds, proc.returncode
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=200, help="size of the big session file (many lines)")
    parser.add_argument("--line-mb", type=int, default=150, help="size of the one overlong line")
    parser.add_argument("--dsn", help="a server where the role may CREATE DATABASE (default: embedded)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mm-restore-bench-"))
    work.chmod(0o755)  # the embedded server may run as another user (as root: pgserver)
    pgdir = work / "pg"
    try:
        dsn = args.dsn or embedded.ensure_running(pgdir, allow_root=os.geteuid() == 0)
        admin = make_conninfo(dsn, dbname="postgres")
        body = "edited src/app.py, ran the tests and looked at the failure " * 16  # ≈ 1 KB a line
        for label, lines, content in (("big session file", args.mb * 1024, body),
                                      ("one overlong line", 1, "x" * (args.line_mb * 1024 * 1024))):
            repo = work / label.replace(" ", "-")
            gitrepo.init(repo)
            write_session(repo, lines, content)
            size = sum(p.stat().st_size for p in (repo / layout.SESSIONS_DIR).glob("*.jsonl")) / 2**20
            print(f"{label}: {size:.0f} MB of jsonl in {lines} line(s)")
            rss, seconds, code = restore_rss(dsn, admin, repo)
            print(f"  peak RSS: restore {rss['restore']:.0f} MB, git {rss['git']:.0f} MB (VmHWM); "
                  f"{seconds:.1f} s, exit {code}")
    finally:
        if not args.dsn:
            embedded.stop(pgdir)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
