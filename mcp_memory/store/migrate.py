"""Numbered SQL migrations: each applied in its own transaction, under an advisory lock, recorded
in `schema_migrations`. Safe to run from two hosts at once (the second waits, then skips)."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime
from importlib import resources

import psycopg

from .sql import scalar

log = logging.getLogger(__name__)

LOCK_KEY = 0x6D636D6D  # "mcmm": the advisory lock that serialises migrations

_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class MigrationState:
    version: int
    name: str
    applied_at: datetime | None
    checksum_ok: bool


def available() -> list[Migration]:
    folder = resources.files(__package__).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            number, _, rest = entry.name.partition("_")
            found.append(Migration(int(number), rest.removesuffix(".sql"), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    return found


def latest_version() -> int:
    return available()[-1].version


def applied(conn: psycopg.Connection) -> dict[int, tuple[str, datetime]]:
    exists = scalar(conn, "SELECT to_regclass('schema_migrations') IS NOT NULL", what="to_regclass")
    if not exists:
        return {}
    rows = conn.execute("SELECT version, checksum, applied_at FROM schema_migrations").fetchall()
    return {version: (checksum, at) for version, checksum, at in rows}


def current_version(conn: psycopg.Connection) -> int:
    done = applied(conn)
    return max(done) if done else 0


def status(conn: psycopg.Connection) -> list[MigrationState]:
    done = applied(conn)
    return [
        MigrationState(
            version=m.version,
            name=m.name,
            applied_at=done[m.version][1] if m.version in done else None,
            checksum_ok=m.version not in done or done[m.version][0] == m.checksum,
        )
        for m in available()
    ]


def migrate(dsn: str) -> list[Migration]:
    """Apply every pending migration; return the ones this call applied."""
    applied_now = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        try:
            conn.execute(_BOOTSTRAP)
            done = applied(conn)
            for migration in available():
                if migration.version in done:
                    continue
                log.info("applying migration %04d_%s", migration.version, migration.name)
                with conn.transaction():
                    conn.execute(migration.sql)
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                        (migration.version, migration.name, migration.checksum),
                    )
                applied_now.append(migration)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
    return applied_now
