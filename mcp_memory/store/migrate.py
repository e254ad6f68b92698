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
        """Digest of the statements: whole-line `--` comments and blank lines do not count, so a
        comment may be reworded in an applied migration without it reading as changed."""
        return hashlib.sha256(statements(self.sql).encode()).hexdigest()[:16]

    def matches(self, recorded: str) -> bool:
        return recorded == self.checksum or recorded in _FULL_TEXT_CHECKSUMS.get(self.version, ())


# Until schema 12, the recorded checksum covered the whole file, comments included. These are the
# digests of the files as they were applied then; their statements are unchanged since (only
# comments were reworded), which `tests/test_migrations.py` checks against `checksum`.
_FULL_TEXT_CHECKSUMS: dict[int, tuple[str, ...]] = {
    1: ("f19ead75e76d0999",), 3: ("9a2f63199a5649be",), 4: ("d7697dda6a13de62",),
    5: ("39b5d54d440a64a5",), 6: ("7bbfaabb829bb978",), 7: ("ce0cb24ca8fcf975",),
    8: ("ad68d81968d56e90",), 10: ("b80ef1955d56a6f9",), 11: ("85702266ad411b21",),
    12: ("29dc42b8366e8364",),
}


def statements(sql: str) -> str:
    """The SQL without whole-line comments, blank lines and trailing blanks."""
    kept = (line.rstrip() for line in sql.splitlines())
    return "\n".join(line for line in kept if line and not line.lstrip().startswith("--"))


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
            checksum_ok=m.version not in done or m.matches(done[m.version][0]),
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
