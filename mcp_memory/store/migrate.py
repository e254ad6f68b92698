"""Numbered SQL migrations: each applied in its own transaction, under the migration lock (see
_MigrationLock), recorded in `schema_migrations`. Safe to run from two hosts at once (the second
waits, then skips)."""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from importlib import resources

import psycopg

from ..errors import Unavailable
from .sql import scalar

log = logging.getLogger(__name__)

LOCK_KEY = 0x6D636D6D  # "mcmm": the advisory lock that serialises migrations
PARTITION_MONTHS_AHEAD = 3  # every `db migrate` also creates the month partitions ahead (migration 0021)

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
# comments were reworded), which `tests/integration/test_migrations.py` checks against `checksum`.
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
    """The schema's version, for any login: through mm_schema_version (migration 0014) where it
    exists, since a gateway login reads no table."""
    if scalar(conn, "SELECT to_regprocedure('mm_schema_version()') IS NOT NULL", what="to_regprocedure"):
        return int(scalar(conn, "SELECT mm_schema_version()", what="mm_schema_version"))
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
    """Apply every pending migration; return the ones this call applied. Every run also re-asserts
    that only the owner may create objects in the schema (mm_secure_schema, migration 0014)."""
    applied_now = []
    with psycopg.connect(dsn, autocommit=True) as conn, _MigrationLock(dsn, conn) as lock:
        conn.execute(_BOOTSTRAP)
        for migration in available():
            lock.upgrade()  # the row lock, as soon as a migration created its table
            if migration.version in applied(conn):  # read again: another host may have gone first
                continue
            log.info("applying migration %04d_%s", migration.version, migration.name)
            with conn.transaction():
                conn.execute(migration.sql)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                    (migration.version, migration.name, migration.checksum),
                )
            applied_now.append(migration)
        if scalar(conn, "SELECT to_regprocedure('mm_secure_schema()') IS NOT NULL", what="to_regprocedure"):
            dropped = scalar(conn, "SELECT mm_secure_schema()", what="mm_secure_schema") or []
            for item in dropped:
                log.warning("dropped %s: created in the schema by a token role", item)
            for item in scalar(conn, "SELECT mm_qualify_builtins()", what="mm_qualify_builtins") or []:
                log.info("qualified the built-in calls of %s", item)
        if scalar(conn, "SELECT to_regprocedure('mm_ensure_partitions(integer)') IS NOT NULL", what="to_regprocedure"):
            for item in scalar(conn, "SELECT mm_ensure_partitions(%(n)s::integer)", {"n": PARTITION_MONTHS_AHEAD},
                               what="mm_ensure_partitions") or []:
                log.info("created partition %s", item)
        if scalar(conn, "SELECT to_regprocedure('mm_harden_partitions()') IS NOT NULL", what="to_regprocedure"):
            # partitions that pg_partman's background worker made (store/partman.py)
            for item in scalar(conn, "SELECT mm_harden_partitions()", what="mm_harden_partitions") or []:
                log.info("gave partition %s row-level security", item)
    return applied_now


class _MigrationLock:
    """One migrating host at a time, by a lock no token can take (README, design note 7).

    From schema 14 on, the lock is the row of `migration_lock`, held FOR UPDATE by a transaction on
    a second connection for the whole run: the table is the owner's alone, so a token cannot lock
    its row. An older or empty schema has no such table: the run then takes the advisory lock of
    earlier versions, waiting at most WAIT_SECONDS, and names whoever holds it if that runs out."""

    WAIT_SECONDS = 120.0

    def __init__(self, dsn: str, conn: psycopg.Connection) -> None:
        self.dsn = dsn
        self.conn = conn
        self.row_conn: psycopg.Connection | None = None
        self.advisory = False

    def __enter__(self) -> _MigrationLock:
        if not self.upgrade():
            self._advisory()
        return self

    def upgrade(self) -> bool:
        """Hold the row lock when its table exists; True when it is held."""
        if self.row_conn is not None:
            return True
        if not scalar(self.conn, "SELECT to_regclass('migration_lock') IS NOT NULL", what="to_regclass"):
            return False
        row_conn = psycopg.connect(self.dsn)
        try:
            row_conn.execute("SET statement_timeout = 0")
            row_conn.execute("SET idle_in_transaction_session_timeout = 0")
            row_conn.execute("SELECT 1 FROM migration_lock FOR UPDATE")
        except BaseException:
            row_conn.close()
            raise
        self.row_conn = row_conn
        return True

    def _advisory(self) -> None:
        deadline = time.monotonic() + self.WAIT_SECONDS
        while not scalar(self.conn, "SELECT pg_try_advisory_lock(%(key)s)", {"key": LOCK_KEY},
                           what="pg_try_advisory_lock"):
            if time.monotonic() >= deadline:
                holder = self.conn.execute(
                    "SELECT l.pid, a.usename, a.application_name FROM pg_locks l "
                    "LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                    "AND l.classid = 0 AND l.objid = %s AND l.objsubid = 1", (LOCK_KEY,)).fetchone()
                who = f"pid {holder[0]} (role {holder[1]}, {holder[2] or 'no application name'})" if holder else "?"
                raise Unavailable(f"db migrate waited {self.WAIT_SECONDS:.0f} s for the migration lock, held by {who}; "
                                  "end that session (SELECT pg_terminate_backend(<pid>)) and migrate again")
            time.sleep(0.2)
        self.advisory = True

    def __exit__(self, *exc: object) -> None:
        if self.row_conn is not None:
            try:
                self.row_conn.close()  # the transaction ends: the row is free
            except psycopg.Error:
                pass
        if self.advisory and not self.conn.closed:
            try:
                self.conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
            except psycopg.Error:
                pass
