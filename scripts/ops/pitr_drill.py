#!/usr/bin/env python3
"""Point-in-time restore drill (install/README.md, "Backup and point-in-time restore").

On this machine, with a throwaway PostgreSQL cluster of its own (own data folder, port and socket
folder; never the distribution's clusters):

 1. initdb, WAL archiving on (archive_command copies each segment into a folder), the database and
    owner role of the admin guide, `mcp-memory db migrate`, `mcp-memory token create` for a host;
 2. the host writes (library and a running `mcp-memory serve`), pg_basebackup, the host writes
    more, the target time is taken, the host writes more after it;
 3. the server stops; the base backup is copied into a new data folder with restore_command and
    recovery_target_time, and started on the same port (as a replacement server would be);
 4. checks: every row written before the target is back, none written after it; then what the guide
    says to run after a restore: `mcp-memory db migrate`, the token still logs in and reads (roles
    live in the cluster, so a physical backup brings them back); the host's MCP server, running all
    along, writes again, and the library and the CLI work; the snapshot ids move past the git
    archive's newest tag (exported by an archiver token after the target) and a new snapshot reaches
    the archive.

Prints a summary with the numbers; exits 1 on any failure. Every server it started is stopped
through pg_ctl (and the MCP server by its own process), and its folders are removed.

    python scripts/ops/pitr_drill.py [--pg-bin /usr/lib/postgresql/15/bin]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import psycopg
from drill_data import PROJECT, Inventory, Writer
from mcp_stdio import McpHost
from pgcluster import Cluster, Tools, basebackup, free_port, recovery_settings, restore_copy
from psycopg import sql

from mcp_memory.config import load_settings
from mcp_memory.library import Memory

SUPERUSER, OWNER, DATABASE = "drill_admin", "mcp_owner", "mcp_memory"


class DrillFailed(Exception):
    """A check of the drill did not hold."""


def check(ok: bool, what: str) -> None:
    if not ok:
        raise DrillFailed(what)


class PitrDrill:
    def __init__(self, bindir: Path, parent: Path | None) -> None:
        self.tools = Tools(bindir)
        self.work = Path(tempfile.mkdtemp(prefix="mcp-memory-pitr-", dir=parent))
        self.work.chmod(0o755)  # the server user reaches its folders inside
        self.port = free_port()
        self.secret = {"super": secrets.token_urlsafe(24), "owner": secrets.token_urlsafe(24)}
        self.clusters: list[Cluster] = []
        self.mcp: McpHost | None = None
        self.numbers: dict[str, object] = {}
        self.token: dict[str, str] = {}
        self.archiver: dict[str, str] = {}

    # -- set-up ---------------------------------------------------------------------------------
    def cluster(self, name: str) -> Cluster:
        sockets = self.tools.folder(self.work / f"{name}-sockets", 0o755)
        log = self.work / f"{name}.log"
        log.touch()
        os.chown(log, self.tools.owner.pw_uid, self.tools.owner.pw_gid)
        made = Cluster(self.tools, self.work / name, port=self.port, sockets=sockets, log=log)
        self.clusters.append(made)
        return made

    def admin_dsn(self, dbname: str = "postgres") -> str:
        return self.clusters[-1].dsn(SUPERUSER, self.secret["super"], dbname)

    def owner_dsn(self) -> str:
        return self.clusters[-1].dsn(OWNER, self.secret["owner"], DATABASE)

    def env(self, who: str) -> dict[str, str]:
        """A clean environment (no MCP_MEMORY_* of the caller) for the owner or the host."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_MEMORY_", "PG"))}
        env.update({"MCP_MEMORY_HOME": str(self.work / f"{who}-home"),
                    "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"})
        if who == "owner":
            env.update({"MCP_MEMORY_DSN": f"postgresql://{OWNER}@127.0.0.1:{self.port}/{DATABASE}",
                        "MCP_MEMORY_PASSWORD": self.secret["owner"]})
        else:
            login = self.archiver if who == "archiver" else self.token
            env.update({"MCP_MEMORY_DSN": login["dsn"], "MCP_MEMORY_PASSWORD": login["token"]})
        return env

    def cli(self, who: str, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "mcp_memory", *args], capture_output=True, text=True,
                              env=self.env(who), timeout=180, check=False, cwd="/")
        check(done.returncode == 0, f"mcp-memory {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def set_up_primary(self) -> Cluster:
        archive = self.tools.folder(self.work / "wal-archive")
        primary = self.cluster("primary")
        primary.initdb(SUPERUSER, self.secret["super"], self.work / "pwfile")
        primary.configure(primary.base_settings(archive))
        primary.start()
        with psycopg.connect(self.admin_dsn(), autocommit=True) as conn:  # install/README.md, section 1
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEROLE PASSWORD {}").format(
                sql.Identifier(OWNER), sql.Literal(self.secret["owner"])))
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(DATABASE), sql.Identifier(OWNER)))
        with psycopg.connect(self.admin_dsn(DATABASE), autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(sql.Identifier(OWNER)))
            conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        self.cli("owner", "db", "migrate")
        self.token = json.loads(self.cli("owner", "token", "create", "--name", "drill-host", "--project", PROJECT,
                                         "--json"))
        self.archiver = json.loads(self.cli("owner", "token", "create", "--name", "drill-archiver", "--archiver",
                                            "--json"))
        return primary

    def memory(self) -> Memory:
        return Memory(settings=load_settings(environ=self.env("host")))

    # -- the drill ------------------------------------------------------------------------------
    def write_and_back_up(self, primary: Cluster) -> tuple[str, Inventory, Inventory, Writer]:
        self.mcp = McpHost(self.env("host"), self.work / "mcp-serve.log")
        memory = self.memory()
        writer = Writer(memory, self.mcp)
        try:
            writer.phase("before-backup", messages=5)
            at_backup = Inventory.read(self.owner_dsn())
            started = time.monotonic()
            basebackup(self.tools, "127.0.0.1", self.port, SUPERUSER, self.secret["super"], self.work / "base")
            self.numbers["base_backup_seconds"] = round(time.monotonic() - started, 2)
            writer.phase("before-target", messages=4)
            at_target = Inventory.read(self.owner_dsn())
            with psycopg.connect(self.owner_dsn()) as conn:
                target = conn.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
            time.sleep(1.2)  # every later commit is clearly after the target
            writer.phase("after-target", messages=3)
        finally:
            memory.close()
        self.cli("archiver", "archive", "--once", "--repo", str(self.work / "git-archive"))
        self.numbers["archive_tags_before_restore"] = len(self.archive_tags())
        self.archive_current_wal()
        self.numbers["at_backup"] = at_backup.counts()
        return target.isoformat(), at_backup, at_target, writer

    def archive_tags(self) -> list[int]:
        done = subprocess.run(["git", "-C", str(self.work / "git-archive"), "tag", "-l", "snapshot-*"],
                              capture_output=True, text=True, check=True, timeout=60)
        return sorted(int(tag.removeprefix("snapshot-")) for tag in done.stdout.split())

    def archive_after_restore(self, writer: Writer) -> None:
        """The guide's step for the archive: snapshot ids move past the archive's highest tag, so a
        new snapshot is exported, not taken for one the archive already has."""
        top = self.archive_tags()[-1]
        check(top == writer.snapshots[-1], f"the archive's newest tag is {top}, the drill's last snapshot "
              f"{writer.snapshots[-1]}")
        with psycopg.connect(self.owner_dsn()) as conn:
            restored_max = conn.execute("SELECT max(snapshot_id) FROM snapshots").fetchone()[0]  # type: ignore[index]
            check(restored_max < top, f"snapshot {top} (after the target) came back: max is {restored_max}")
            conn.execute("SELECT setval(pg_get_serial_sequence('snapshots', 'snapshot_id'), "  # install/README.md, 9
                         "greatest(%s, (SELECT coalesce(max(snapshot_id), 1) FROM snapshots)))", (top,))
        assert self.mcp is not None
        new = self.mcp.call("create_snapshot", {"session_id": writer.mcp_session, "commit_msg": "after the restore"})
        check(new["snapshot_id"] == top + 1, f"the new snapshot got id {new['snapshot_id']}, expected {top + 1}")
        self.cli("archiver", "archive", "--once", "--repo", str(self.work / "git-archive"))
        check(new["snapshot_id"] in self.archive_tags(), f"snapshot {new['snapshot_id']} did not reach the archive")
        self.numbers["archive"] = {"newest_tag_before_restore": top, "restored_max_snapshot": restored_max,
                                   "new_snapshot_exported": new["snapshot_id"]}

    def archive_current_wal(self) -> None:
        """Switch to a new WAL segment and wait until the one holding the last writes is archived."""
        with psycopg.connect(self.admin_dsn(), autocommit=True) as conn:
            name = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()[0]  # type: ignore[index]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                row = conn.execute("SELECT last_archived_wal, archived_count FROM pg_stat_archiver").fetchone()
                if row and row[0] and row[0] >= name:
                    self.numbers["wal_segments_archived"] = row[1]
                    return
                time.sleep(0.2)
        raise DrillFailed(f"WAL segment {name} was not archived within 60 s")

    def restore(self, primary: Cluster, target: str) -> Cluster:
        primary.stop()
        started = time.monotonic()
        restored = self.cluster("restored")
        restore_copy(self.tools, self.work / "base", restored.data)
        restored.configure(recovery_settings(self.work / "wal-archive", target))
        signal = restored.data / "recovery.signal"
        signal.touch()
        os.chown(signal, self.tools.owner.pw_uid, self.tools.owner.pw_gid)
        restored.start()
        restored.wait_promoted(self.admin_dsn())
        self.numbers["restore_seconds"] = round(time.monotonic() - started, 2)
        return restored

    def verify(self, at_target: Inventory, after: Inventory) -> None:
        back = Inventory.read(self.owner_dsn())
        for name, keys in at_target.keys.items():
            missing, extra = keys - back.keys[name], back.keys[name] - keys
            check(not missing, f"{len(missing)} {name} written before the target are missing: {sorted(missing)[:5]}")
            leaked = extra & after.keys[name]
            check(not leaked, f"{len(leaked)} {name} written after the target came back: {sorted(leaked)[:5]}")
            check(not extra, f"{len(extra)} {name} the drill never wrote are there: {sorted(extra)[:5]}")
        check(all(after.keys.values()), f"the drill wrote nothing of some kind after the target: {after.counts()}")
        self.numbers["at_target"] = at_target.counts()
        self.numbers["restored"] = back.counts()
        self.numbers["lost_after_target (expected)"] = after.counts()

    def after_restore(self, writer: Writer, restored_messages: int) -> None:
        """What the admin guide says to run after a restore, and the host carrying on."""
        self.cli("owner", "db", "migrate")
        status = self.cli("owner", "db", "status")
        check("pending" not in status.lower(), f"migrations pending after the restore:\n{status}")
        with psycopg.connect(self.token["dsn"], password=self.token["token"], connect_timeout=10) as conn:
            row = conn.execute("SELECT current_user, (SELECT count(*) FROM messages)").fetchone()
        check(row is not None and row[0] == self.token["role"], f"the token logged in as {row and row[0]}")
        check(row is not None and row[1] == restored_messages,
              f"the token reads {row and row[1]} messages, the restored database has {restored_messages}")
        try:
            psycopg.connect(self.token["dsn"], password=self.token["token"] + "x", connect_timeout=10).close()
            raise DrillFailed("a wrong token logged in to the restored server")
        except psycopg.OperationalError:
            pass
        assert self.mcp is not None and writer.main is not None
        session, lost = writer.sent[-1]  # the host's last append, lost with the rollback: sent again
        page = self.mcp.call("read_session", {"session_id": session, "after_seq": 0, "limit": 1000})
        last = max((m["seq"] for m in page.get("messages", [])), default=0)
        again = self.mcp.call("append_message", {"session_id": session, "message": lost})
        check(again.get("seq") == last + 1 and again.get("duplicate") is False,
              f"the MCP server's append after the restore returned {again}, expected seq {last + 1}")
        memory = self.memory()
        try:
            seq = memory.session(session_id=writer.main.session_id).log_user_message("after the restore")
        finally:
            memory.close()
        listed = json.loads(self.cli("host", "sessions", "--json"))
        self.numbers["host_after_restore"] = {"mcp_append_seq": again["seq"], "library_append_seq": seq,
                                              "cli_sessions_listed": len(listed.get("sessions", listed))}

    def run(self) -> dict[str, object]:
        primary = self.set_up_primary()
        target, _, at_target, writer = self.write_and_back_up(primary)
        after = Inventory.read(self.owner_dsn()).minus(at_target)
        self.numbers["target_time"] = target
        self.restore(primary, target)
        self.verify(at_target, after)
        self.after_restore(writer, len(at_target.keys["messages"]))
        self.archive_after_restore(writer)
        return self.numbers

    def close(self) -> None:
        if self.mcp is not None:
            self.mcp.close()
        for cluster in self.clusters:
            try:
                cluster.stop()
            except Exception as exc:  # report, go on stopping the others
                print(f"could not stop the server on {cluster.data}: {exc}", file=sys.stderr)
        shutil.rmtree(self.work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pg-bin", type=Path, default=Path("/usr/lib/postgresql/15/bin"),
                        help="PostgreSQL server binaries (default: /usr/lib/postgresql/15/bin)")
    parser.add_argument("--workdir", type=Path, help="where the throwaway folders go (default: TMPDIR)")
    args = parser.parse_args(argv)
    # stopped from outside (SIGTERM): leave through the `finally` below, which stops the servers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    try:
        drill = PitrDrill(args.pg_bin, args.workdir)
    except (FileNotFoundError, KeyError) as exc:
        print(f"pitr drill: cannot run here: {exc}", file=sys.stderr)
        return 2
    try:
        numbers = drill.run()
    except (DrillFailed, RuntimeError, OSError, psycopg.Error, subprocess.TimeoutExpired) as exc:
        print(f"PITR DRILL FAILED: {exc}", file=sys.stderr)
        for log in sorted(drill.work.glob("*.log")):
            print(f"--- {log.name} (tail)\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]),
                  file=sys.stderr)
        return 1
    finally:
        drill.close()
    numbers["seconds"] = round(time.monotonic() - started, 1)
    print(f"PITR drill passed ({datetime.now().astimezone():%Y-%m-%d %H:%M:%S %Z})")
    for key, value in numbers.items():
        print(f"  {key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
