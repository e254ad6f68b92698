"""Git archive export benchmarks. Every number is reported next to the physical reference measured in the
same run on the same server: raw psycopg COPY TO STDOUT / SELECT of the same rows.

    python scripts/bench/archive_export.py                 # embedded server in a temporary profile
    python scripts/bench/archive_export.py --dsn postgresql://…  [--quick] [--json]

(a) export of one snapshot of a 100k-message session into an empty archive: lines/s, and the ratio to
    raw COPY and raw SELECT of the same rows
(b) export of a snapshot adding 1k new messages into an archive already holding 1M lines (1000
    sessions × 1000) vs into an empty archive                                    target ≤ 2×
    (new session, and 1k more lines on an existing 1000-line session)
(c) for information: 1k more lines on the single 100k-line session of (a). Git stores a file as one
    blob, so `git add` re-hashes that session's whole file: the cost follows the size of the touched
    session's file, never the size of the archive.

    python scripts/bench/archive_export.py --large 600000

only exports one session of that many messages with the default call_timeout (8 s) through the
archiver, as `archive --once` does (pages of reads, each its own short transaction), and reports
the time, the pages and the longest page.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

from mcp_memory.archive import export, gitrepo
from mcp_memory.config import load_settings
from mcp_memory.core.messages import payload_digest
from mcp_memory.store import embedded, migrate
from mcp_memory.wiring import build


def fill(dsn: str, session_id: str, project: str, start: int, count: int) -> None:
    """Messages straight into the table (COPY): the bench measures export, not append."""
    now = datetime.now(UTC)
    with psycopg.connect(dsn) as conn:
        month = conn.execute("SELECT part_month FROM sessions WHERE session_id = %s",  # migration 0021
                             (session_id,)).fetchone()[0]  # type: ignore[index]
        with conn.cursor() as cur, cur.copy("COPY messages (session_id, seq, project_id, append_id, role, payload, "
                                            "payload_hash, created_at, part_month) FROM STDIN") as copy:
            for seq in range(start + 1, start + count + 1):
                payload = {"schema_version": 1, "role": "user" if seq % 2 else "assistant",
                           "content": f"message {seq} of a long agent session: edited src/app.py, ran the tests "
                                      f"and looked at the failure in test_{seq % 97}", "metadata": {"model": "m"}}
                copy.write_row((session_id, seq, project, f"b-{seq}", payload["role"], Jsonb(payload),
                                payload_digest(payload), now, month))
        conn.execute("UPDATE sessions SET last_seq = %s WHERE session_id = %s", (start + count, session_id))


def physical(dsn: str, session_id: str, after: int, upto: int) -> tuple[float, float]:
    """Seconds for raw COPY TO STDOUT and raw SELECT (fetchall) of the rows an export reads."""
    sql = ("SELECT seq, append_id, payload, payload_hash, created_at FROM messages "
           f"WHERE session_id = '{session_id}' AND seq > {after} AND seq <= {upto} ORDER BY seq")
    with psycopg.connect(dsn) as conn:
        t = time.perf_counter()
        with conn.cursor() as cur, cur.copy(f"COPY ({sql}) TO STDOUT") as copy:
            for _ in copy:
                pass
        copy_s = time.perf_counter() - t
        t = time.perf_counter()
        conn.execute(sql).fetchall()
        select_s = time.perf_counter() - t
    return copy_s, select_s


def timed_export(svc, repo: Path, session_id: str) -> float:
    snap = svc.create_snapshot(session_id, "bench")
    t = time.perf_counter()
    export.export_snapshot(svc.db, repo, snap.snapshot_id)
    return time.perf_counter() - t


def new_session(svc, dsn: str, n: int) -> str:
    s = svc.create_session("bench").session_id
    fill(dsn, s, "bench", 0, n)
    return s


def run(dsn: str, *, quick: bool) -> dict:
    big_n = 20_000 if quick else 100_000
    sessions, per = (100, 1000) if quick else (1000, 1000)
    reps = 3 if quick else 5
    work = Path(tempfile.mkdtemp(prefix="mm-archive-bench-"))
    svc = build(load_settings(dsn=dsn, environ={}))
    out: dict = {}
    try:
        # (a) throughput
        big = new_session(svc, dsn, big_n)
        repo_a = work / "a"
        gitrepo.init(repo_a)
        secs = timed_export(svc, repo_a, big)
        copy_s, select_s = physical(dsn, big, 0, big_n)
        out["a"] = {"messages": big_n, "export_s": round(secs, 3), "lines_per_s": round(big_n / secs),
                    "raw_copy_s": round(copy_s, 3), "raw_select_s": round(select_s, 3),
                    "ratio_to_copy": round(secs / copy_s, 1), "ratio_to_select": round(secs / select_s, 1)}

        # (b) 1k new lines: archive with sessions × per lines vs an empty archive
        repo_big, repo_empty = work / "big", work / "empty"
        gitrepo.init(repo_big)
        gitrepo.init(repo_empty)
        existing = []
        t = time.perf_counter()
        for _ in range(sessions):
            sid = new_session(svc, dsn, per)
            existing.append(sid)
            export.export_snapshot(svc.db, repo_big, svc.create_snapshot(sid, "fill").snapshot_id)
        fill_s = time.perf_counter() - t
        empty_new = [timed_export(svc, repo_empty, new_session(svc, dsn, 1000)) for _ in range(reps)]
        big_new = [timed_export(svc, repo_big, new_session(svc, dsn, 1000)) for _ in range(reps)]
        big_append = []
        for sid in existing[:reps]:
            fill(dsn, sid, "bench", per, 1000)
            big_append.append(timed_export(svc, repo_big, sid))
        ref_copy, ref_select = physical(dsn, existing[0], per, per + 1000)
        e, b, ba = statistics.median(empty_new), statistics.median(big_new), statistics.median(big_append)
        out["b"] = {"archive_lines": sessions * per, "archive_sessions": sessions, "fill_s": round(fill_s, 1),
                    "empty_archive_ms": round(e * 1000, 1), "big_archive_new_session_ms": round(b * 1000, 1),
                    "big_archive_existing_session_ms": round(ba * 1000, 1),
                    "ratio_new_session": round(b / e, 2), "ratio_existing_session": round(ba / e, 2),
                    "raw_copy_1k_ms": round(ref_copy * 1000, 2), "raw_select_1k_ms": round(ref_select * 1000, 2),
                    "ratio_empty_to_select": round(e / ref_select, 1)}

        # (c) 1k more lines on the one huge session
        fill(dsn, big, "bench", big_n, 1000)
        c = timed_export(svc, repo_a, big)
        out["c"] = {"session_lines": big_n, "append_1k_ms": round(c * 1000, 1),
                    "ratio_to_empty_archive": round(c / e, 2)}
    finally:
        svc.db.close()
        shutil.rmtree(work, ignore_errors=True)
    return out


def large(dsn: str, n: int) -> dict:
    from mcp_memory.archive.daemon import Archiver
    from mcp_memory.archive.options import ArchiverOptions, AutoSnapshot
    from mcp_memory.store.archive_store import ArchiveStore

    work = Path(tempfile.mkdtemp(prefix="mm-archive-large-"))
    svc = build(load_settings(dsn=dsn, environ={}))
    pages: list[float] = []
    original = ArchiveStore.export_page

    def timed(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            pages.append(time.perf_counter() - t)

    ArchiveStore.export_page = timed  # type: ignore[method-assign]
    try:
        sid = svc.create_session("bench").session_id
        t = time.perf_counter()
        for start in range(0, n, 100_000):
            fill(dsn, sid, "bench", start, min(100_000, n - start))
        fill_s = time.perf_counter() - t
        svc.create_snapshot(sid, "large")
        t = time.perf_counter()
        summary = Archiver(svc.db, ArchiverOptions(repo=work / "archive", auto=AutoSnapshot(enabled=False))).run(
            once=True)
        secs = time.perf_counter() - t
    finally:
        ArchiveStore.export_page = original  # type: ignore[method-assign]
        svc.db.close()
        shutil.rmtree(work, ignore_errors=True)
    return {"messages": n, "fill_s": round(fill_s, 1), "export_s": round(secs, 1), "lines": summary.lines,
            "failed": summary.failed, "errors": summary.errors, "call_timeout_s": svc.settings.call_timeout,
            "pages": len(pages), "longest_page_s": round(max(pages, default=0), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", help="a server where this role may CREATE DATABASE (default: embedded)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (20k / 100k lines)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--large", type=int, metavar="N", help="only: export one session of N messages")
    args = parser.parse_args()
    home = None
    admin = args.dsn
    if admin is None:
        home = Path(tempfile.mkdtemp(prefix="mm-bench-"))
        home.chmod(0o755)
        admin = embedded.ensure_running(home / "pg", allow_root=True)
    name = f"mm_bench_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        dsn = make_conninfo(admin, dbname=name)
        migrate.migrate(dsn)
        if args.large:
            print(json.dumps(large(dsn, args.large), indent=2))
            return
        result = run(dsn, quick=args.quick)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if home is not None:
            embedded.stop(home / "pg")
            shutil.rmtree(home, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    a, b, c = result["a"], result["b"], result["c"]
    print(f"(a) export {a['messages']} messages: {a['export_s']}s = {a['lines_per_s']} lines/s; raw COPY "
          f"{a['raw_copy_s']}s ({a['ratio_to_copy']}×), raw SELECT {a['raw_select_s']}s ({a['ratio_to_select']}×)")
    print(f"(b) 1k new lines: empty archive {b['empty_archive_ms']} ms; archive of {b['archive_lines']} lines "
          f"({b['archive_sessions']} sessions, filled in {b['fill_s']}s): new session {b['big_archive_new_session_ms']} "
          f"ms ({b['ratio_new_session']}×), existing session {b['big_archive_existing_session_ms']} ms "
          f"({b['ratio_existing_session']}×)  target ≤ 2×; raw COPY of the 1k rows {b['raw_copy_1k_ms']} ms, "
          f"raw SELECT {b['raw_select_1k_ms']} ms (export = {b['ratio_empty_to_select']}× SELECT)")
    print(f"(c) 1k more lines on the {c['session_lines']}-line session: {c['append_1k_ms']} ms "
          f"({c['ratio_to_empty_archive']}× the empty-archive case; git re-hashes that one file)")


if __name__ == "__main__":
    main()
