"""The team drill's machinery (scripts/ops/team_drill.py): its names, its folders, the hosts' own
environments, the CLI runner, the processes it starts (each stopped by its own PID) and the
clean-up of every database and role it made on the central server."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

REPO = Path(__file__).resolve().parents[2]
CLI_TIMEOUT = 300


class DrillFailed(Exception):
    """A check of the drill did not hold; the message says what was measured."""


def check(ok: object, what: str) -> None:
    if not ok:
        raise DrillFailed(what)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Names:
    """Every name the drill makes on the central server carries one random suffix: roles are the
    cluster's, so a second drill (or the test suite) on the same server never meets them."""

    suffix: str = field(default_factory=lambda: secrets.token_hex(3))

    def __getattr__(self, item: str) -> str:
        if item.startswith("_"):
            raise AttributeError(item)
        return f"mmdrill_{self.suffix}_{item}"


def mcp_memory_program() -> str:
    """The `mcp-memory` of this interpreter's environment (what install.sh would have put on PATH)."""
    program = Path(sys.executable).parent / "mcp-memory"
    if not program.exists():
        raise DrillFailed(f"no mcp-memory next to {sys.executable}: pip install -e . first")
    return str(program)


class Team:
    """The central server (a superuser DSN), the drill's folder and everything it started."""

    def __init__(self, admin_dsn: str, work: Path) -> None:
        self.admin_dsn = admin_dsn
        self.target = conninfo_to_dict(admin_dsn)
        self.work = work
        self.names = Names()
        self.program = mcp_memory_program()
        self.procs: dict[str, tuple[subprocess.Popen[bytes], Any]] = {}
        self.databases: list[str] = []
        self.secret: dict[str, str] = {}

    # -- addresses ---------------------------------------------------------------------------
    def direct(self, user: str, dbname: str | None = None) -> str:
        """A DSN straight to the central server, in the guide's URI form, no password."""
        host = self.target.get("host") or "127.0.0.1"
        port = self.target.get("port") or "5432"
        return f"postgresql://{user}@{host}:{port}/{dbname or self.names.db}"

    def superuser(self, dbname: str | None = None) -> str:
        return make_conninfo(self.admin_dsn, dbname=dbname or "postgres")

    # -- environments ------------------------------------------------------------------------
    def home(self, name: str) -> Path:
        folder = self.work / name
        folder.mkdir(mode=0o700, exist_ok=True)
        return folder

    def env(self, name: str, **extra: str) -> dict[str, str]:
        """A host of its own: its own HOME (config, credentials, data), nothing of ours inherited."""
        keep = {k: v for k, v in os.environ.items()
                if not k.startswith(("MCP_MEMORY_", "XDG_", "PG")) and k not in ("HOME", "VIRTUAL_ENV")}
        keep["PATH"] = f"{Path(self.program).parent}{os.pathsep}{keep.get('PATH', '/usr/bin:/bin')}"
        keep["HOME"] = str(self.home(name))
        keep["PYTHONUNBUFFERED"] = "1"
        return {**keep, **extra}

    def cli(self, env: dict[str, str], *args: str, stdin: str | None = None, ok: bool = True,
            timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """`mcp-memory ARGS` as that host; with ok, a non-zero exit fails the step with its stderr."""
        done = subprocess.run([self.program, *args], env=env, input=stdin, capture_output=True, text=True,
                              timeout=timeout, cwd=env["HOME"])
        if ok and done.returncode != 0:
            raise DrillFailed(f"mcp-memory {' '.join(args[:3])} exited {done.returncode}: "
                              f"{(done.stderr or done.stdout).strip()[-800:]}")
        return done

    def cli_json(self, env: dict[str, str], *args: str, stdin: str | None = None) -> Any:
        return json.loads(self.cli(env, *args, stdin=stdin).stdout)

    def run(self, args: list[str], env: dict[str, str] | None = None, stdin: str | None = None,
            timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(args, env=env, input=stdin, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise DrillFailed(f"{Path(args[0]).name} exited {done.returncode}: "
                              f"{(done.stderr or done.stdout).strip()[-800:]}")
        return done

    # -- SQL as the superuser ----------------------------------------------------------------
    def sql(self, statement: str | sql.Composable, params: tuple[Any, ...] = (), *,
            dbname: str | None = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.superuser(dbname), autocommit=True, connect_timeout=10) as conn:
            cur = conn.execute(statement, params)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    # -- processes ---------------------------------------------------------------------------
    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """A long-running process, its output in <work>/<name>.log; stopped by its PID in stop()."""
        log = (self.work / f"{name}.log").open("ab")
        proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=(env or {}).get("HOME", str(self.work)))
        self.procs[name] = (proc, log)
        return proc

    def log_tail(self, name: str, chars: int = 1500) -> str:
        path = self.work / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop(self, name: str) -> None:
        proc, log = self.procs.pop(name, (None, None))
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=20)
        log.close()

    def wait_port(self, name: str, port: int, seconds: float = 30) -> None:
        proc = self.procs[name][0]
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return
            check(proc.poll() is None, f"{name} exited ({proc.returncode}): {self.log_tail(name)}")
            time.sleep(0.1)
        raise DrillFailed(f"{name} did not listen on port {port} within {seconds:.0f}s: {self.log_tail(name)}")

    # -- clean-up ----------------------------------------------------------------------------
    def close(self) -> None:
        """Every process by its PID, then the drill's databases and roles (found by the suffix)."""
        for name in reversed(list(self.procs)):
            self.stop(name)
        pattern = f"mmdrill\\_{self.names.suffix}\\_%"
        try:
            for db in self.databases:
                self.sql(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
            roles = [r[0] for r in self.sql("SELECT rolname FROM pg_roles WHERE rolname LIKE %s "
                                            "ORDER BY rolname = %s, rolname", (pattern, self.names.owner))]
            for role in roles:
                self.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
                self.sql(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        finally:
            shutil.rmtree(self.work, ignore_errors=True)
