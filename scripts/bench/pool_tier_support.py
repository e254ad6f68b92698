"""Parts of scripts/bench/pool_tier.py: the PgBouncer it starts (the guide's settings), the agents
(one core Service and one client connection each, a thread each), and the backend monitor."""

from __future__ import annotations

import configparser
import os
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from mcp_memory.config import Settings
from mcp_memory.core.service import Service
from mcp_memory.security import tokens
from mcp_memory.wiring import build

INSTALL = Path(__file__).resolve().parents[2] / "install" / "pgbouncer"
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
GUIDE_KEYS = ("pool_mode", "auth_type", "auth_query", "server_reset_query", "server_reset_query_always",
              "default_pool_size", "reserve_pool_size", "reserve_pool_timeout", "max_db_connections")


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0}
    ordered = sorted(values)
    return {"p50_ms": statistics.median(ordered) * 1000, "p95_ms": ordered[int(len(ordered) * 0.95)] * 1000,
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def bouncer(owner_dsn: str, gateway: tokens.CreatedGateway, *, max_clients: int, tag: str) -> Iterator[tuple[int, str]]:
    """PgBouncer with the guide's [pgbouncer] settings, every client checked by auth_query and the
    server login forced to `gateway`; yields (port, lookup login)."""
    target = conninfo_to_dict(owner_dsn)
    lookup, secret = f"mmbench_{tag}_pgb", uuid.uuid4().hex
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute((INSTALL / "auth_query.sql").read_text().replace("mcp_pgbouncer", lookup))
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(lookup), sql.Literal(secret)))
    guide = configparser.ConfigParser(interpolation=None)
    guide.read(INSTALL / "pgbouncer.ini")
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="mm-pooltier-"))
    folder.chmod(0o755)
    (folder / "userlist.txt").write_text(f'"{lookup}" "{secret}"\n"{gateway.role}" "{gateway.password}"\n')
    lines = [f"{key} = {guide['pgbouncer'][key]}" for key in GUIDE_KEYS]
    lines += ["listen_addr = 127.0.0.1", f"listen_port = {port}", "unix_socket_dir =", f"auth_user = {lookup}",
              f"auth_file = {folder}/userlist.txt", f"max_client_conn = {max_clients}", "log_connections = 0",
              "log_disconnections = 0"]
    (folder / "pgbouncer.ini").write_text(
        f"[databases]\n{target['dbname']} = host={target['host']} port={target.get('port', 5432)} "
        f"dbname={target['dbname']} user={gateway.role}\n[pgbouncer]\n" + "\n".join(lines) + "\n")
    for name in ("userlist.txt", "pgbouncer.ini"):
        (folder / name).chmod(0o644)
    args = [PGBOUNCER, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        args[1:1] = ["-u", "postgres"]
    log = (folder / "pgbouncer.out").open("w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"pgbouncer did not start: {(folder / 'pgbouncer.out').read_text()[-2000:]}")
            time.sleep(0.1)
        yield port, lookup
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
        with psycopg.connect(owner_dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS pgbouncer CASCADE")


class Monitor:
    """The most server backends of the database seen at once (sampled every 0.2 s), not counting the
    admin's own connections."""

    def __init__(self, admin_dsn: str, dbname: str) -> None:
        self.admin_dsn, self.dbname = admin_dsn, dbname
        self.peak = 0
        self.logins: list[str] = []
        self.pooled = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def reset(self, logins: list[str], *, pooled: bool) -> None:
        """Count the backends of these logins (pooled), or of every other one (direct)."""
        self.logins, self.pooled, self.peak = logins, pooled, 0

    def _run(self) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            while not self._stop.wait(0.2):
                count = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND usename <> "
                                     "current_user AND backend_type = 'client backend' AND "
                                     "(usename = ANY(%s)) = %s", (self.dbname, self.logins, self.pooled)).fetchone()
                self.peak = max(self.peak, int(count[0]) if count else 0)


class Agents:
    """One thread per agent: its own Service (pool of one connection) logged in with its own token."""

    def __init__(self, settings: Settings, roles: list[tokens.CreatedToken], dsn_of: Callable[[str], str], *,
                 pooled: bool, words: tuple[str, ...]) -> None:
        self.settings, self.roles, self.dsn_of, self.pooled, self.words = settings, roles, dsn_of, pooled, words
        self.services: list[Service | None] = [None] * len(roles)
        self.sessions: list[str] = [""] * len(roles)
        self.setup_errors: Counter[str] = Counter()

    def _setup(self, i: int) -> None:
        role = self.roles[i]
        project = role.projects[0] if role.projects else "proj-0"
        host = build(replace(self.settings, dsn=self.dsn_of(role.role), password=role.token, pgbouncer=self.pooled,
                             gateway=self.pooled), application_name="bench@agent", local=False)
        self.services[i] = host
        try:
            self.sessions[i] = host.create_session(project, {"title": f"agent {i}"}).session_id
        except Exception as exc:  # counted and shown: an agent that could not start
            self.setup_errors[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1

    def start(self) -> None:
        started = time.monotonic()
        threads = [threading.Thread(target=self._setup, args=(i,)) for i in range(len(self.roles))]
        for batch in range(0, len(threads), 200):  # at most 200 logins at once
            for t in threads[batch:batch + 200]:
                t.start()
            for t in threads[batch:batch + 200]:
                t.join()
        print(f"  {len(self.roles)} agents connected in {time.monotonic() - started:.0f} s "
              f"({sum(self.setup_errors.values())} failed)", flush=True)

    def run(self, *, duration: float, think: float) -> dict[str, Any]:
        latencies: list[list[float]] = [[] for _ in self.roles]
        errors: Counter[str] = Counter()
        lock = threading.Lock()
        deadline = time.monotonic() + duration

        def agent(i: int) -> None:
            rng = random.Random(i)
            host, sid = self.services[i], self.sessions[i]
            if host is None or not sid:
                return
            project = self.roles[i].projects[0] if self.roles[i].projects else "proj-0"
            time.sleep(rng.uniform(0, think))
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    if rng.random() < 0.8:
                        text = " ".join(rng.choice(self.words) for _ in range(12))
                        host.append_message(sid, {"role": rng.choice(("user", "assistant")), "content": text,
                                                  "append_id": f"msg_{uuid.uuid4().hex}"})
                    else:
                        host.search_messages(rng.choice(self.words), project_id=project, limit=5)
                    latencies[i].append(time.perf_counter() - started)
                except Exception as exc:  # counted, never retried: an error is an error
                    with lock:
                        errors[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
                time.sleep(rng.expovariate(1 / think))

        threads = [threading.Thread(target=agent, args=(i,)) for i in range(len(self.roles))]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        flat = [x for per in latencies for x in per]
        return {"calls": len(flat), "calls_per_s": len(flat) / elapsed, **percentiles(flat),
                "errors": sum(errors.values()) + sum(self.setup_errors.values()),
                "error_kinds": dict((errors + self.setup_errors).most_common(5))}

    def close(self) -> None:
        for host in self.services:
            if host is not None:
                host.db.close()
