#!/usr/bin/env python3
"""Automatic failover drill (install/README.md, "Automatic failover").

On this machine, with a pg_auto_failover formation of its own (scripts/ops/autoctl.py: a monitor
and two data nodes, own ports and folders, loopback only; never the distribution's clusters):

 1. the database and owner role of the admin guide on the primary, `mcp-memory db migrate`, a host
    token and an archiver token (roles replicate to the standby with everything else);
 2. host processes (scripts/ops/failover_hosts.py, the real core through the package) append
    continuously with append_ids over a multi-host DSN (`host=127.0.0.1,127.0.0.1 port=p1,p2
    target_session_attrs=read-write`), retrying an unanswered append with the same append_id; a
    live tail follows one session with read_session(wait_seconds); `mcp-memory archive --daemon`
    exports snapshots into a git repository;
 3. the failovers, one after the other: `switchover` (pg_autoctl perform switchover), `kill-node`
    (SIGKILL to the primary's keeper and server at once, as when its machine dies; the keeper is
    started again once the other node has taken over, and rejoins as a standby), `kill-postgres`
    (SIGKILL to the primary's postmaster only: its keeper restarts it or the monitor fails over);
    after each: a snapshot, which the archiver must export, and an append the tail must see;
 4. checks: every acknowledged append is stored exactly once, at the seq its answer named, with
    gap-free seqs; the hosts, the tail and the archiver are the processes started in step 2 (none
    restarted, none failed); per failover: unavailability (the longest pause between two
    acknowledged appends), retries, duplicates (retries whose first try had committed), lost
    acknowledged appends (must be 0), seconds until the archiver and the tail carried on.

Progress on stderr; the summary on stdout (`--json`: one JSON document). Exits 1 on any failure,
2 when it cannot run here. Every process it started is stopped by its own id (the keepers by their
process groups) and its folders are removed.

    python scripts/ops/failover_drill.py [--failovers switchover,kill-node,...] [--seconds-between 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from autoctl import Formation
from failover_checks import DrillFailed, HostLogs, check, summarize
from pgcluster import Tools
from psycopg import sql

from mcp_memory.errors import Unavailable
from mcp_memory.wiring import build

OWNER, PROJECT = "mcp_owner", "failover-drill"
KINDS = ("switchover", "kill-node", "kill-postgres")
DEFAULT = "switchover,kill-node,switchover,kill-postgres,kill-node"
HERE = Path(__file__).resolve().parent


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


class FailoverDrill:
    def __init__(self, bindir: Path, parent: Path | None, hosts: int) -> None:
        self.tools = Tools(bindir)
        self.work = Path(tempfile.mkdtemp(prefix="mcp-memory-failover-", dir=parent))
        self.work.chmod(0o755)  # the server user reaches its folders inside
        self.formation = Formation(self.tools, self.work, bindir)
        self.hosts = hosts
        self.logins: dict[str, dict[str, str]] = {}
        self.owner_secret = os.urandom(12).hex()
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.events: list[dict[str, Any]] = []
        self.repo = self.work / "git-archive"

    # -- set-up ---------------------------------------------------------------------------------
    def set_up(self) -> None:
        say("creating the monitor and two data nodes (pg_autoctl)")
        self.formation.create_monitor()
        self.formation.create_node("node_a")
        # the standby is built (a base backup of node_a) while the schema is migrated on node_a
        failed: list[BaseException] = []
        standby = threading.Thread(target=self._create_standby, args=(failed,), name="node_b")
        standby.start()
        try:
            self.prepare_database()
        finally:
            standby.join()
        if failed:
            raise failed[0]
        primary = self.formation.wait_stable()
        say(f"formation ready: {primary.name} is the primary, schema migrated, host and archiver tokens made")

    def _create_standby(self, failed: list[BaseException]) -> None:
        try:
            self.formation.create_node("node_b")
        except BaseException as exc:  # noqa: BLE001 - raised again by set_up
            failed.append(exc)

    def prepare_database(self) -> None:
        """install/README.md, sections 1-3: the owner role owns the database, migrates, makes tokens."""
        conn = self.formation.connect_primary("postgres")
        with conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEROLE PASSWORD {}").format(
                sql.Identifier(OWNER), sql.Literal(self.owner_secret)))
            conn.execute(sql.SQL("ALTER DATABASE mcp_memory OWNER TO {}").format(sql.Identifier(OWNER)))
            conn.execute(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(sql.Identifier(OWNER)))
            conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        self.cli("owner", "db", "migrate")
        for who, flags in (("host", ["--project", PROJECT]), ("archiver", ["--archiver"])):
            self.logins[who] = json.loads(self.cli("owner", "token", "create", "--name", f"drill-{who}", *flags, "--json"))

    def env(self, who: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_MEMORY_", "PG"))}
        env.update({"MCP_MEMORY_HOME": str(self.work / f"{who}-home"),
                    "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"})
        user, secret = (OWNER, self.owner_secret) if who == "owner" else \
            (self.logins[who]["role"], self.logins[who]["token"])
        env.update({"MCP_MEMORY_DSN": self.formation.multi_host_dsn(user), "MCP_MEMORY_PASSWORD": secret})
        return env

    def cli(self, who: str, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "mcp_memory", *args], capture_output=True, text=True,
                              env=self.env(who), timeout=180, check=False, cwd="/")
        check(done.returncode == 0, f"mcp-memory {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    # -- the workload ---------------------------------------------------------------------------
    def start_workload(self) -> tuple[str, str]:
        self.service = build(environ=self.env("host"), application_name="failover-drill")
        busy = self.service.create_session(PROJECT, {"title": "failover drill: busy"}).session_id
        calm = self.service.create_session(PROJECT, {"title": "failover drill: tailed"}).session_id
        for n in range(self.hosts):
            # every host but the last on one busy session (seq allocation under contention); the
            # last one appends slowly to the tailed session, so the tail waits on LISTEN between
            session, pause = (busy, "0.02") if n < self.hosts - 1 else (calm, "0.3")
            self._spawn(f"host{n}", [str(HERE / "failover_hosts.py"), "append", session, f"h{n}", "--pause", pause])
        self._spawn("tail", [str(HERE / "failover_hosts.py"), "tail", calm])
        self._spawn("archiver", ["-m", "mcp_memory", "archive", "--daemon", "--repo", str(self.repo)], who="archiver")
        return busy, calm

    def _spawn(self, name: str, args: list[str], who: str = "host") -> None:
        out = (self.work / f"{name}.jsonl").open("wb")
        err = (self.work / f"{name}.err").open("wb")
        self.workers[name] = subprocess.Popen([sys.executable, *args], stdout=out, stderr=err, env=self.env(who),
                                              stdin=subprocess.DEVNULL, cwd="/")
        out.close()
        err.close()

    def snapshot(self, session_id: str) -> int:
        """A snapshot, retried while the database is away (the archiver must export it)."""
        deadline = time.monotonic() + 120
        while True:
            try:
                return self.service.create_snapshot(session_id, "failover drill").snapshot_id
            except Unavailable:
                check(time.monotonic() < deadline, "no snapshot could be made within 120 s")
                time.sleep(0.2)

    def archived(self) -> set[int]:
        if not (self.repo / ".git").exists():
            return set()
        done = subprocess.run(["git", "-C", str(self.repo), "tag", "-l", "snapshot-*"], capture_output=True,
                              text=True, timeout=60, check=False)
        return {int(tag.removeprefix("snapshot-")) for tag in done.stdout.split()}

    def wait_until(self, what: str, ok: Any, timeout: float = 120) -> float:
        started = time.monotonic()
        while not ok():
            check(time.monotonic() - started < timeout, f"not within {timeout:.0f} s: {what}")
            self.alive()
            time.sleep(0.2)
        return round(time.monotonic() - started, 2)

    def alive(self) -> None:
        for name, proc in self.workers.items():
            check(proc.poll() is None, f"{name} (pid {proc.pid}) exited {proc.returncode}: "
                  + (self.work / f"{name}.err").read_text(errors="replace")[-1500:])

    # -- the failovers --------------------------------------------------------------------------
    def failover(self, n: int, kind: str, busy: str) -> None:
        f = self.formation
        before = f.wait_stable()
        event: dict[str, Any] = {"n": n, "kind": kind, "primary_before": before.name, "started": time.time()}
        say(f"failover {n}: {kind} (primary {before.name})")
        if kind == "switchover":
            f.switchover()
        elif kind == "kill-postgres":
            pid = before.postmaster_pid()
            check(pid is not None, f"no postmaster.pid in {before.data}")
            os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]
            time.sleep(2)  # the monitor and the keeper notice
        else:
            f.crash(before)
            self.wait_until("another node takes over", lambda: f.taken_over(before), 180)
            f.start(before)  # back as a standby (pg_autoctl rewinds it)
        after = f.wait_stable(240)
        event.update(primary_after=after.name, settled=time.time())
        event["hosts_back_s"] = self.wait_until(
            "every host acknowledges an append again",
            lambda: HostLogs.read(self.work, self.hosts).every_host_acked_after(event["settled"]), 120)
        snap = self.snapshot(busy)
        event["archiver_back_s"] = self.wait_until(f"the archiver exports snapshot {snap}",
                                                   lambda: snap in self.archived(), 120)
        event["tail_back_s"] = self.wait_until(
            "the tail sees an append made after the failover",
            lambda: HostLogs.read(self.work, self.hosts).tail_saw_after(event["settled"]), 120)
        event["snapshot"] = snap
        say(f"failover {n}: {before.name} → {after.name}; hosts back after {event['hosts_back_s']} s, "
            f"archiver {event['archiver_back_s']} s, tail {event['tail_back_s']} s")
        self.events.append(event)

    def run(self, kinds: list[str], between: float) -> dict[str, Any]:
        started = time.monotonic()
        self.set_up()
        setup_seconds = round(time.monotonic() - started, 1)
        busy, calm = self.start_workload()
        pids = {name: proc.pid for name, proc in self.workers.items()}
        # the failovers start under load: every host has appended and the tail has received
        self.wait_until("every host appends and the tail receives", lambda: (
            logs := HostLogs.read(self.work, self.hosts)).every_host_acked_after(0) and logs.tail_max() > 0, 120)
        time.sleep(between)
        for n, kind in enumerate(kinds, 1):
            self.failover(n, kind, busy)
            time.sleep(between)
        self.alive()
        final = self.snapshot(busy)
        self.wait_until("the archiver exports the last snapshot", lambda: final in self.archived(), 120)
        for name in [f"host{n}" for n in range(self.hosts)]:
            self.stop_worker(name)
        last = HostLogs.read(self.work, self.hosts).last_seq(self.hosts - 1)
        self.wait_until("the tail sees the last append", lambda: HostLogs.read(self.work, self.hosts).tail_max() >= last,
                        60)
        for name in ("tail", "archiver"):
            self.stop_worker(name)
        with psycopg.connect(self.env("owner")["MCP_MEMORY_DSN"], password=self.owner_secret) as conn:
            summary = summarize(conn, HostLogs.read(self.work, self.hosts), self.events,
                                sessions={"busy": busy, "tailed": calm}, pids=pids,
                                snapshots=[e["snapshot"] for e in self.events] + [final], archived=self.archived())
        # the formation's set-up (pg_autoctl creates, migrations, tokens) and the drill after it
        return {**summary, "setup_seconds": setup_seconds,
                "drill_seconds": round(time.monotonic() - started - setup_seconds, 1)}

    def stop_worker(self, name: str) -> None:
        proc = self.workers[name]
        check(proc.poll() is None, f"{name} exited {proc.returncode} before the end")
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        check(proc.returncode in (0, -signal.SIGTERM), f"{name} ended with {proc.returncode}: "
              + (self.work / f"{name}.err").read_text(errors="replace")[-1500:])

    def close(self, keep: Path | None = None) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        if getattr(self, "service", None) is not None:
            self.service.db.close()
        self.formation.stop_all()
        if keep is not None:  # the logs of every process, for a look afterwards
            keep.mkdir(parents=True, exist_ok=True)
            for log in [*self.work.glob("*.log"), *self.work.glob("*.err"), *self.work.glob("*.jsonl")]:
                shutil.copy2(log, keep / log.name)
        shutil.rmtree(self.work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pg-bin", type=Path, default=Path("/usr/lib/postgresql/15/bin"),
                        help="PostgreSQL server binaries (default: /usr/lib/postgresql/15/bin)")
    parser.add_argument("--workdir", type=Path, help="where the throwaway folders go (default: TMPDIR)")
    parser.add_argument("--failovers", default=DEFAULT, help=f"comma-separated, of {', '.join(KINDS)} "
                        f"(default: {DEFAULT})")
    parser.add_argument("--hosts", type=int, default=3, help="host processes appending (default 3, at least 2)")
    parser.add_argument("--seconds-between", type=float, default=3.0, help="steady work before and between failovers")
    parser.add_argument("--keep-logs", type=Path, help="copy every process's log into this folder at the end")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON document")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.failovers.split(",") if k.strip()]
    if not kinds or any(k not in KINDS for k in kinds) or args.hosts < 2:
        parser.error(f"--failovers takes one or more of {', '.join(KINDS)}; --hosts at least 2")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # leave through `finally`: stop what we started
    started = time.monotonic()
    try:
        drill = FailoverDrill(args.pg_bin, args.workdir, args.hosts)
    except (FileNotFoundError, KeyError) as exc:
        print(f"failover drill: cannot run here: {exc}", file=sys.stderr)
        return 2
    try:
        summary = drill.run(kinds, args.seconds_between)
    except (DrillFailed, RuntimeError, OSError, psycopg.Error, subprocess.TimeoutExpired) as exc:
        print(f"FAILOVER DRILL FAILED: {exc}", file=sys.stderr)
        for log in sorted([*drill.work.glob("*.log"), *drill.work.glob("*.err")]):
            print(f"--- {log.name} (tail)\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]),
                  file=sys.stderr)
        return 1
    finally:
        drill.close(args.keep_logs)
    summary["seconds"] = round(time.monotonic() - started, 1)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print("failover drill passed")
        for key, value in summary.items():
            if key == "failovers":
                for event in value:
                    print(f"  failover: {event}")
            else:
                print(f"  {key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
