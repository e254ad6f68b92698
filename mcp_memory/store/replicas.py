"""Read replicas (`[database] read_dsn`): reads on hot standbys, writes on the primary.

Why a standby may answer a read, and when it may not (README, Read replicas):

* Only reads the service routes here (search, list, read, get) run on a standby; writes, and
  everything inside a write transaction, run on the primary (`Service.reads`, core/service.py).
* Read-your-writes: every transaction on the primary that wrote ends by noting the primary's WAL
  insert position after its commit (`note_commit`, run last inside `Database.transaction`). A read
  goes to a standby only when that standby has replayed past the newest position this process
  wrote (`pg_last_wal_replay_lsn()`); else it goes to the primary. The rule is per process (a REST
  server's tokens share it): conservative, never stale for what this process wrote.
* Bounded staleness for others' writes: a standby whose replay is more than `max_replica_lag`
  seconds behind what it has received is skipped (the usual lag measure: 0 when replay caught up
  with receive, else the age of the last replayed commit).
* `read_session(wait_seconds)` tails stay on the primary (LISTEN cannot run on a standby).
* "Not found" on a standby is asked again of the primary: the row may be newer than its replay
  (a session another host just created and named to this one).
* A standby that is down, not a standby at all, or lagging is skipped (the primary answers); the
  first time a standby changes state a log line says so, and it is tried again after a pause.

The check runs on the standby's own connection, first in each routed transaction: one extra
round trip there. On the primary (only when read_dsn is set) a transaction pays one more statement
(did it write?) and a write one more again (its position); a lone autocommit append pays one.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from ..config import Settings
from ..credentials import mask_dsn, with_password
from ..errors import NotFound, Unavailable
from .db import Database, without_location

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_SECONDS = 5.0  # a standby that was down or not a standby is tried again after this pause
LAGGING_SECONDS = 1.0  # a lagging standby is skipped this long before it is asked again
CONNECT_SECONDS = 2.0  # libpq's smallest connect_timeout: a standby must not hold a read for long

STATUS = """SELECT pg_is_in_recovery(),
       pg_last_wal_replay_lsn() >= %(written)s::pg_lsn,
       CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
            ELSE extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()) END"""
WROTE = "SELECT pg_current_xact_id_if_assigned() IS NOT NULL"
WRITE_POSITION = "SELECT pg_current_wal_insert_lsn()::text"


def lsn_value(text: str) -> int:
    """A pg_lsn's text ("16/B374D848") as a number, to keep the newest."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def lsn_text(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


class Reroute(Exception):
    """A routed read must run on the primary instead (not an McpMemoryError: nothing on the read
    path catches it on the way back to `Reads.run`). `kind` is what is logged once per change;
    `pause`: how long the standby is then left out (0: only this read)."""

    def __init__(self, kind: str, detail: str = "", *, pause: float = 0.0) -> None:
        super().__init__(f"{kind}{': ' + detail if detail else ''}")
        self.kind = kind
        self.pause = pause


class ReplicaDatabase(Database):
    """One `read_dsn`: a pool of its own, on the primary's credentials and limits. No migrations:
    a standby's schema is the primary's, replayed."""

    def __init__(self, settings: Settings, read_dsn: str, *, application_name: str) -> None:
        super().__init__(replace(settings, dsn=read_dsn, direct_dsn=None, read_dsns=(), auto_migrate=False,
                                 connect_timeout=min(settings.connect_timeout or CONNECT_SECONDS, CONNECT_SECONDS)),
                         application_name=application_name)

    def ensure_schema(self) -> None:
        """Nothing to migrate on a standby (the primary's pool checked the schema first)."""


@dataclass
class Replica:
    db: ReplicaDatabase
    label: str
    skip_until: float = 0.0
    state: str = "unused"  # the last state logged: "ok", or why it is skipped


class Replicas:
    """The standbys of one primary Database and the newest position this process wrote there."""

    def __init__(self, primary: Database) -> None:
        self.primary = primary
        self.max_lag = primary.settings.max_replica_lag
        self.replicas = [Replica(ReplicaDatabase(primary.settings, dsn, application_name=primary.application_name),
                                 mask_dsn(dsn)) for dsn in primary.settings.read_dsns]
        self._lock = threading.Lock()
        self._written = 0
        self._next = 0
        primary.after_transaction = self.note_commit
        primary.before_close(self.close)

    # the primary's side ------------------------------------------------------------------------
    def note_commit(self, conn: psycopg.Connection) -> None:
        """Run last inside each primary transaction: when it wrote, commit now and note the insert
        position, which lies past the commit record a standby must replay to show the write. A
        connection already idle here ran its statement in autocommit (a lone append does): it may
        have written, so its position is noted too. A failed transaction is left to the pool (its
        commit rolls back): nothing of it reaches a standby."""
        status = conn.info.transaction_status
        if status == TransactionStatus.INERROR:
            return
        if status != TransactionStatus.IDLE:
            row = conn.execute(WROTE).fetchone()
            if not (row and row[0]):
                return
            conn.commit()
        position = conn.execute(WRITE_POSITION).fetchone()
        if position is not None:
            with self._lock:
                self._written = max(self._written, lsn_value(position[0]))

    def written(self) -> str:
        with self._lock:
            return lsn_text(self._written)

    # the standbys' side ------------------------------------------------------------------------
    def choose(self) -> Replica | None:
        """The next standby not paused (round robin), or None."""
        now = time.monotonic()
        with self._lock:
            count = len(self.replicas)
            for step in range(count):
                replica = self.replicas[(self._next + step) % count]
                if replica.skip_until <= now:
                    self._next = (self._next + step + 1) % count
                    return replica
        return None

    def check(self, replica: Replica, conn: psycopg.Connection) -> None:
        """Raise Reroute unless this standby may answer now (see the module docstring)."""
        row = conn.execute(STATUS, {"written": self.written()}).fetchone()
        standby, caught_up, lag = row if row is not None else (False, None, None)
        if not standby:
            raise Reroute("not a standby", "pg_is_in_recovery() is false", pause=RETRY_SECONDS)
        if lag is None or float(lag) > self.max_lag:
            shown = "unknown" if lag is None else f"{float(lag):.2f} s"
            raise Reroute("lagging", f"replay lag {shown} > [database] max_replica_lag {self.max_lag:g} s",
                          pause=LAGGING_SECONDS)
        if not caught_up:
            raise Reroute("read-your-writes", "not yet replayed past this process's last write")

    def skip(self, replica: Replica, reroute: Reroute) -> None:
        """Leave the standby out for the reroute's pause; a line in the log when its state changes."""
        if not reroute.pause:
            return
        with self._lock:
            replica.skip_until = time.monotonic() + reroute.pause
            changed, replica.state = replica.state != reroute.kind, reroute.kind
        if changed:
            log.warning("read replica %s skipped, reads go to the primary: %s", replica.label, reroute)

    def served(self, replica: Replica) -> None:
        with self._lock:
            before, replica.state = replica.state, "ok"
        if before not in ("ok", "unused"):
            log.warning("read replica %s serves reads again", replica.label)

    def close(self) -> None:
        for replica in self.replicas:
            replica.db.close()


class ReplicaRead(Database):
    """The database a routed read runs on: the standby's pool, each transaction checked first."""

    def __init__(self, replicas: Replicas, replica: Replica) -> None:
        super().__init__(replica.db.settings, application_name=replica.db.application_name)
        self.replicas = replicas
        self.replica = replica

    def dsn(self) -> str:
        return self.replica.db.dsn()

    def pool(self) -> ConnectionPool:
        return self.replica.db.pool()

    def reset(self) -> None:
        self.replica.db.reset()

    def connect(self, **kwargs: object) -> psycopg.Connection:
        raise Reroute("direct connection", "a direct connection is the primary's")

    @contextmanager
    def transaction(self, *, bounded: bool = True) -> Iterator[psycopg.Connection]:
        try:
            with self.replica.db.transaction(bounded=bounded) as conn:
                self.replicas.check(self.replica, conn)
                yield conn
        except psycopg.errors.SerializationFailure as exc:  # cancelled by a conflict with recovery
            raise Reroute("recovery conflict", str(exc.diag.message_primary)) from exc
        except Unavailable as exc:
            cause = exc.__cause__
            if not isinstance(cause, psycopg.Error) or isinstance(cause, psycopg.errors.QueryCanceled):
                raise  # not the standby's (or a timeout: the primary would take as long again)
            if isinstance(cause, psycopg.errors.ReadOnlySqlTransaction):
                log.error("a routed read tried to write on standby %s: %s", self.replica.label, exc)
                raise Reroute("the operation writes") from exc
            raise Reroute("unreachable", str(exc), pause=RETRY_SECONDS) from exc


class Reads:
    """Where a service's reads run: `run(operation)` calls operation(db) with a standby when one
    may answer, else with the service's own database (the primary)."""

    def __init__(self, db: Database, replicas: Replicas | None) -> None:
        self.db = db
        self.replicas = replicas

    def run(self, operation: Callable[[Database], T]) -> T:
        replica = self.replicas.choose() if self.replicas is not None else None
        if replica is None or self.replicas is None:
            return operation(self.db)
        self.replicas.primary.pool()  # the primary first, once: current schema, not a standby itself
        try:
            result = operation(self._on(ReplicaRead(self.replicas, replica)))
        except Reroute as exc:
            self.replicas.skip(replica, exc)
            log.debug("read routed to the primary (replica %s: %s)", replica.label, exc)
            return operation(self.db)
        except NotFound as exc:  # a row newer than the standby's replay (another host's new session)
            log.debug("read routed to the primary (replica %s: not found there: %s)", replica.label, exc)
            return operation(self.db)
        self.replicas.served(replica)
        log.debug("read routed to replica %s", replica.label)
        return result

    def _on(self, standby: Database) -> Database:
        """The standby as the service's role sees it (a REST token: its proof there too)."""
        from .roles import RoleDatabase

        return RoleDatabase(standby, self.db.role, self.db.token) if isinstance(self.db, RoleDatabase) else standby


_SETS: weakref.WeakKeyDictionary[Database, Replicas] = weakref.WeakKeyDictionary()
_SETS_LOCK = threading.Lock()


def reads(db: Database) -> Reads:
    """The read router of a service on `db`: one replica set per primary Database (the per-token
    RoleDatabases of serve-http share their server's)."""
    from .roles import RoleDatabase

    base = db.shared if isinstance(db, RoleDatabase) else db
    if not base.settings.read_dsns:
        return Reads(db, None)
    with _SETS_LOCK:
        found = _SETS.get(base)
        if found is None:
            found = _SETS[base] = Replicas(base)
    return Reads(db, found)


def probe(settings: Settings, read_dsn: str) -> tuple[bool, str]:
    """Whether one `read_dsn` may serve reads now, in words (`mcp-memory doctor`)."""
    label = mask_dsn(read_dsn)
    dsn = with_password(read_dsn, settings.password, fallback_file=settings.credentials_file)
    try:
        with psycopg.connect(dsn, connect_timeout=int(CONNECT_SECONDS), autocommit=True) as conn:
            row = conn.execute(STATUS, {"written": "0/0"}).fetchone()
    except psycopg.Error as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return False, f"{label} is unreachable ({without_location(mask_dsn(reason))}): its reads go to the primary"
    standby, _, lag = row if row is not None else (False, None, None)
    if not standby:
        return False, f"{label} is not a standby (pg_is_in_recovery() is false): its reads go to the primary"
    if lag is None or float(lag) > settings.max_replica_lag:
        shown = "unknown" if lag is None else f"{float(lag):.2f} s"
        return False, (f"{label} lags {shown}, more than [database] max_replica_lag {settings.max_replica_lag:g} s: "
                       "its reads go to the primary until it catches up")
    return True, f"{label}: standby, replay lag {float(lag):.2f} s (max {settings.max_replica_lag:g} s)"
