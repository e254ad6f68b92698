"""Parts of scripts/bench/pool_tier.py: the PgBouncer it starts (the guide's settings), the agents
(one core Service and one client connection each, calls carried by worker threads), and the
backend monitor."""

from __future__ import annotations

import configparser
import heapq
import os
import random
import shutil
import socket
import statistics
import sys
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
from mcp_memory.store.db import Database
from mcp_memory.wiring import build_cleaner

INSTALL = Path(__file__).resolve().parents[2] / "install" / "pgbouncer"
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
GUIDE_KEYS = ("pool_mode", "auth_type", "auth_query", "server_reset_query", "server_reset_query_always",
              "default_pool_size", "reserve_pool_size", "reserve_pool_timeout", "max_db_connections")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))
from pgbouncer_process import pgbouncer_process  # noqa: E402 - scripts/ops


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
    try:
        with pgbouncer_process(args, folder, port):
            yield port, lookup
    finally:
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


class OneConnection:
    """What Database.transaction asks of its pool, over ONE connection: an agent is one host with one
    client connection, and psycopg_pool's maintenance threads (four per pool) would make 5,000 agents
    20,000 threads on the measuring machine. Committed on success, rolled back on error, as the pool."""

    def __init__(self, opener: Callable[[], psycopg.Connection]) -> None:
        self._opener = opener
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = self._opener()
            conn = self._conn
            try:
                yield conn
            except BaseException:
                if not conn.closed:
                    conn.rollback()
                raise
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.commit()

    def get_stats(self) -> dict[str, int]:
        return {}

    def close(self, timeout: float = 0) -> None:
        if self._conn is not None:
            self._conn.close()


class AgentDatabase(Database):
    """The core's Database (its transactions, proof, limits, error translation) on OneConnection."""

    def _open_pool(self) -> Any:
        def opener() -> psycopg.Connection:
            return psycopg.connect(self.dsn(), application_name=self.application_name,
                                   connect_timeout=max(1, int(self.settings.connect_timeout)),
                                   **{**self._pooler_options(), **self._timeout_options()})
        return OneConnection(opener)


class Agents:
    """One thread per agent: its own Service (pool of one connection) logged in with its own token."""

    def __init__(self, settings: Settings, roles: list[tokens.CreatedToken], dsn_of: Callable[[str], str], *,
                 pooled: bool, words: tuple[str, ...]) -> None:
        self.settings, self.roles, self.dsn_of, self.pooled, self.words = settings, roles, dsn_of, pooled, words
        self.services: list[Service | None] = [None] * len(roles)
        self.sessions: list[str] = [""] * len(roles)
        self.setup_errors: Counter[str] = Counter()
        self.index_now: list[Callable[[str], None]] = [lambda session_id: None] * len(roles)

    def _setup(self, i: int) -> None:
        role = self.roles[i]
        project = role.projects[0] if role.projects else "proj-0"
        settings = replace(self.settings, dsn=self.dsn_of(role.role), password=role.token, pgbouncer=self.pooled,
                           gateway=self.pooled)
        host = Service(AgentDatabase(settings, application_name="bench@agent"), cleaner=build_cleaner(settings))
        # no indexer thread per agent (5,000 threads): the worker that appended runs the host's
        # indexer pass right after the call (the same work its background thread does at once)
        indexer = host.indexer

        def queue_now(session_id: str) -> None:
            with indexer._cond:
                indexer._queue.add(session_id)
            indexer.flush(background=True)

        indexer.submit = lambda session_id: None  # type: ignore[method-assign]
        self.index_now[i] = queue_now
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
              f"({sum(self.setup_errors.values())} failed)", file=sys.stderr, flush=True)

    def run(self, *, duration: float, think: float, workers: int = 64) -> dict[str, Any]:
        """Each agent calls on its own schedule (exponential gaps of mean `think`); `workers` threads
        carry the calls (5,000 threads of their own would measure this process's scheduler, not
        the database), each call on the agent's own connection and Service."""
        latencies: list[float] = []
        late: list[float] = []
        errors: Counter[str] = Counter()
        lock = threading.Lock()
        rng = random.Random(1)
        start = time.monotonic()
        deadline = start + duration
        due = [(start + rng.uniform(0, think), i) for i, host in enumerate(self.services) if host and self.sessions[i]]
        heapq.heapify(due)

        def call(i: int, r: random.Random) -> float:
            """The call's latency; after an append, the host's indexer pass (its own work, as its
            background thread would do it at once), not counted in the call."""
            host, sid = self.services[i], self.sessions[i]
            assert host is not None
            project = self.roles[i].projects[0] if self.roles[i].projects else "proj-0"
            started = time.perf_counter()
            if r.random() < 0.8:
                text = " ".join(r.choice(self.words) for _ in range(12))
                host.append_message(sid, {"role": r.choice(("user", "assistant")), "content": text,
                                          "append_id": f"msg_{uuid.uuid4().hex}"})
                took = time.perf_counter() - started
                self.index_now[i](sid)
                return took
            host.search_messages(r.choice(self.words), project_id=project, limit=5)
            return time.perf_counter() - started

        def worker(seed: int) -> None:
            r = random.Random(seed)
            while True:
                with lock:
                    if not due or due[0][0] >= deadline or time.monotonic() >= deadline:
                        return
                    when, i = heapq.heappop(due)
                pause = when - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                try:
                    took = call(i, r)
                    with lock:
                        latencies.append(took)
                        late.append(max(0.0, -pause))
                except Exception as exc:  # counted, never retried: an error is an error
                    with lock:
                        errors[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
                with lock:
                    heapq.heappush(due, (time.monotonic() + r.expovariate(1 / think), i))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        return {"calls": len(latencies), "calls_per_s": len(latencies) / elapsed, **percentiles(latencies),
                "start_late_p95_ms": percentiles(late)["p95_ms"],
                "errors": sum(errors.values()) + sum(self.setup_errors.values()),
                "error_kinds": dict((errors + self.setup_errors).most_common(5))}

    def close(self) -> None:
        for host in self.services:
            if host is not None:
                host.db.close()
