"""Connection management: resolve the database (embedded or external), open the pool lazily,
migrate when needed, and translate driver errors into the package's error hierarchy once."""

from __future__ import annotations

import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from ..config import Settings
from ..credentials import mask_dsn, with_password
from ..errors import Conflict, Forbidden, Invalid, McpMemoryError, NotFound, Unauthorized, Unavailable
from . import embedded, migrate
from .deadline import WATCHDOG, Armed
from .standby import check_not_standby

log = logging.getLogger(__name__)



_TOKEN_ROLE = re.compile(r"^mmt\.([a-z][a-z0-9_\-]{0,62})\.[A-Za-z0-9_\-]{43}$")


class OwnTokenRefused(Unauthorized):
    """The proof of this host's own token was refused (rotated past its grace, revoked, expired)."""


def login_of_token(dsn: str) -> str:
    """A DSN whose password is a token (`mmt.<role>.…`) logs in as the token's role, whatever its
    user says: after `token rotate`, the new token's login (NAME_r2, …) is another role of the same
    token (migration 0029), and writing the new token where the old one was is all a host changes."""
    params = conninfo_to_dict(dsn)
    match = _TOKEN_ROLE.match(str(params.get("password") or ""))
    if match is None or params.get("user") == match.group(1):
        return dsn
    return make_conninfo(dsn, user=match.group(1))


class Database:
    """One per process. Thread-safe; nothing touches the network until first use."""

    def __init__(self, settings: Settings, *, application_name: str = "mcp-memory") -> None:
        self.settings = settings
        self.application_name = application_name
        self._lock = threading.Lock()
        self._pool: ConnectionPool | None = None
        self._dsn: str | None = None
        self._token: str | None = None
        self._server_seen = 0.0  # when a call last asked for the pool (monotonic)
        self._before_close: list[Callable[[], object]] = []
        # run last inside each transaction that succeeded (store/replicas.py notes the write position)
        self.after_transaction: Callable[[psycopg.Connection], None] | None = None

    def before_close(self, finish: Callable[[], object]) -> None:
        """Run `finish` when the process lets go of the database (work that must still reach it)."""
        self._before_close.append(finish)

    @property
    def kind(self) -> str:
        return "embedded" if self.settings.embedded else "external"

    def dsn(self) -> str:
        """The DSN in use (starting the embedded server if that is the database), password included."""
        if self._dsn is None:
            if self.settings.embedded:  # peer authentication on a private socket: no password to look up
                self._dsn = embedded.ensure_running(
                    self.settings.embedded_dir, allow_root=self.settings.embedded_as_root,
                    connect_timeout=self.settings.connect_timeout)
            else:  # the keyring's backends take ~0.5 s to load: only a DSN that may need one asks it
                self._dsn = login_of_token(with_password(self.settings.dsn or "", self.settings.password,
                                                         fallback_file=self.settings.credentials_file))
        return self._dsn

    def masked_dsn(self) -> str:
        return mask_dsn(self._dsn) if self._dsn else self.settings.describe_dsn()

    def direct_dsn(self) -> str:
        """Where connections that keep session state go (LISTEN, the archiver's lease): `[database]
        direct_dsn` when `dsn` points at a pooler, else the DSN in use."""
        if self.settings.direct_dsn and not self.settings.embedded:
            direct = with_password(self.settings.direct_dsn, self.settings.password,
                                   fallback_file=self.settings.credentials_file)
            if conninfo_to_dict(direct).get("password"):
                return login_of_token(direct)
            # nothing stored for the direct address: the host's token is the password of both
            pooled = conninfo_to_dict(self.dsn()).get("password")
            return login_of_token(make_conninfo(direct, password=pooled)) if pooled else direct
        return self.dsn()

    def connect(self, **kwargs: Any) -> psycopg.Connection:
        """A direct connection (not pooled, past any pooler: direct_dsn): for LISTEN, the archiver's
        lease, migrations, admin work."""
        with translate_errors():
            return psycopg.connect(
                self.direct_dsn(),
                connect_timeout=max(1, int(self.settings.connect_timeout)),
                application_name=self.application_name,
                **{**self._pooler_options(), **kwargs},
            )

    def _pooler_options(self) -> dict[str, Any]:
        """Behind PgBouncer in transaction mode a server connection changes between transactions:
        prepared statements (psycopg prepares a query run 5 times) would be missing there."""
        return {"prepare_threshold": None} if self.settings.pgbouncer else {}

    def _timeout_options(self) -> dict[str, object]:
        """Server-side limits of every pooled call: `statement_timeout` and `lock_timeout` (PgBouncer
        does not pass startup options: there each transaction sets them, SET LOCAL)."""
        if self.settings.pgbouncer:
            return {}
        ms = [int(self.settings.statement_timeout * 1000), int(self.settings.lock_timeout * 1000)]
        return {"options": f"-c statement_timeout={ms[0]} -c lock_timeout={ms[1]}"}

    def _timeout_settings(self) -> tuple[str, str]:
        return (f"{int(self.settings.statement_timeout * 1000)}ms", f"{int(self.settings.lock_timeout * 1000)}ms")

    def pool(self) -> ConnectionPool:
        with self._lock:
            stale = self._pool if self._embedded_stopped() else None
            if stale is not None:  # `db stop` (or a crash) ended it: start it again rather than wait on dead sockets
                log.info("the embedded server is not running any more; starting it again")
                self._pool, self._dsn = None, None
                stale.close(timeout=0)
            if self._pool is None:
                self._pool = self._open_pool()
            return self._pool

    def _embedded_stopped(self) -> bool:
        """The embedded default's server is gone (read from postmaster.pid, no round trip), looked at
        only when this process has not used it for IDLE_CHECK_SECONDS: a burst of calls pays nothing."""
        if not self.settings.embedded or self._pool is None:
            return False
        now = time.monotonic()
        idle, self._server_seen = now - self._server_seen > IDLE_CHECK_SECONDS, now
        return idle and not embedded.running(self.settings.embedded_dir)

    def _open_pool(self) -> ConnectionPool:
        with translate_errors():
            dsn = self.dsn()
            self.ensure_schema()
            pool = ConnectionPool(
                dsn,
                min_size=self.settings.pool_min,
                max_size=max(self.settings.pool_max, self.settings.pool_min, 1),
                timeout=self.settings.connect_timeout,
                open=False,
                check=_check_if_idle,  # no `reset`: with one, every return hops through a pool worker thread
                kwargs={
                    "application_name": self.application_name,
                    "connect_timeout": max(1, int(self.settings.connect_timeout)),
                    **self._pooler_options(),
                    **self._timeout_options(),
                },
                name="mcp-memory",
            )
            pool.open(wait=False)
            return pool

    def pool_stats(self) -> dict[str, int]:
        """The pool's own counts (pool_size, pool_available, pool_max, requests_waiting …); empty
        before the first call opened it."""
        with self._lock:
            pool = self._pool
        return dict(pool.get_stats()) if pool is not None else {}

    def ensure_schema(self) -> None:
        """Apply pending migrations when auto_migrate is on (always for the embedded default)."""
        with translate_errors():
            dsn = self.dsn()
            timeout = max(1, int(self.settings.connect_timeout))
            with psycopg.connect(dsn, autocommit=True, connect_timeout=timeout) as conn, \
                    WATCHDOG.guard(conn, self.settings.call_timeout):
                check_not_standby(conn, self.settings)  # a standby as `dsn`: say so, once
                current = migrate.current_version(conn)
                if current >= migrate.latest_version():
                    return
            behind = (f"the database schema is at version {current}, this mcp-memory needs "
                      f"{migrate.latest_version()}: the database owner must run `mcp-memory db migrate`")
            if not (self.settings.auto_migrate or self.settings.embedded):
                raise Unavailable(f"{behind} (auto_migrate is off)")
            try:
                applied = migrate.migrate(dsn)
            except (Forbidden, psycopg.errors.InsufficientPrivilege) as exc:  # a token may not migrate: an upgrade of the hosts before the database
                raise Unavailable(f"{behind} (this login may not migrate)") from exc
        if applied:
            log.info("applied %d migration(s) to %s", len(applied), mask_dsn(dsn))

    def reset(self) -> None:
        """Forget the pool and DSN after a failure, so the next call reconnects (or restarts the
        embedded server) instead of waiting on a pool that lost its server."""
        with self._lock:
            pool, self._pool, self._dsn, self._token = self._pool, None, None, None
        if pool is not None:
            pool.close(timeout=0)

    @contextmanager
    def transaction(self, *, bounded: bool = True) -> Iterator[psycopg.Connection]:
        """A pooled connection inside one transaction (committed on success, rolled back on error),
        cut off when the whole call (commit included) takes longer than `call_timeout`. `bounded=False`
        for bulk work an operator started (restore): no deadline, no statement or lock timeout."""
        armed: Armed | None = None
        try:
            with translate_errors(), self.pool().connection() as conn:
                if bounded:
                    armed = WATCHDOG.arm(conn, self.settings.call_timeout)
                    if self.settings.pgbouncer:
                        # PgBouncer passes no startup options: the limits are set per transaction
                        self._begin(conn, self._timeout_settings())
                    elif self.settings.gateway:
                        self._begin(conn, None)
                else:
                    self._begin(conn, ("0", "0"))
                try:
                    yield conn
                    if self.after_transaction is not None:
                        self.after_transaction(conn)
                finally:
                    _mark_used(conn)
        except OwnTokenRefused:
            self.reset()  # the next call reads the stored token again: `login` may have put a rotated one there
            raise
        except Unavailable as exc:
            self.reset()
            if isinstance(exc.__cause__, psycopg.errors.AdminShutdown) and not (armed and armed.fired):
                self._explain_no_connection(exc)
            if armed is not None and armed.fired:
                raise Unavailable(f"database unreachable, retry later (no answer within {armed.seconds:g} s: "
                                  "database.call_timeout)") from exc
            raise
        finally:
            WATCHDOG.disarm(armed)

    def _begin(self, conn: psycopg.Connection, limits: tuple[str, str] | None) -> None:
        """The first statement of a pooled transaction, one round trip: its limits (when given) and,
        with `[database] gateway`, the token's proof and the switch to its role (mm_enter, migration
        0020): behind a pooler that logs every host in as one gateway login, a role counts only with
        the proof of this transaction."""
        parts = ["set_config('statement_timeout', %s, true)", "set_config('lock_timeout', %s, true)"] \
            if limits else []
        params: list[str] = list(limits or ())
        if self.settings.gateway:
            parts.append("mm_enter(%s)")
            params.append(self._gateway_token())
        if not parts:
            return
        try:
            conn.execute("SELECT " + ", ".join(parts), params)
        except psycopg.Error as exc:
            if self.settings.gateway and exc.sqlstate == "MM403":
                raise OwnTokenRefused("the token was not accepted (revoked, expired or mistyped)") from exc
            raise

    def _gateway_token(self) -> str:
        """The token this host proves each transaction with: the password of its DSN (the DSN itself,
        MCP_MEMORY_PASSWORD or the keyring: the password PgBouncer checked at login)."""
        if self._token is None:
            token = conninfo_to_dict(self.dsn()).get("password")
            if not token:
                raise Invalid("[database] gateway = true needs the host's token: the password of [database] dsn "
                              "(in the DSN, MCP_MEMORY_PASSWORD or the keyring: `mcp-memory login`)")
            self._token = str(token)
        return self._token

    def _explain_no_connection(self, exc: Unavailable) -> None:
        """A revoked token's open connections are ended like those of a server shutting down: one
        direct login tells a refused credential (`[forbidden]`, no retry helps) from a restart.
        (A new pool then logs in directly first, in ensure_schema, which says the same.)"""
        try:
            with psycopg.connect(self.dsn(), connect_timeout=max(1, int(self.settings.connect_timeout))):
                pass
        except psycopg.OperationalError as probe:
            mapped = _translate(probe)
            if isinstance(mapped, Unauthorized):
                raise mapped from exc
        except (psycopg.Error, McpMemoryError):
            pass

    def close(self) -> None:
        for finish in self._before_close:
            if self._pool is None:
                break  # never connected: nothing can be pending
            try:
                finish()
            except Exception:  # closing goes on; what did not finish is caught up later
                log.exception("work before closing the database failed")
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def through_pooler(conn: psycopg.Connection) -> bool:
    """True when `conn` reaches PostgreSQL through a pooler: a server names its backend's process id
    to the client at login, PgBouncer hands out a key of its own, so the backend that answers is
    not the one named."""
    with translate_errors():
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    return row is None or conn.info.backend_pid != row[0]


IDLE_CHECK_SECONDS = 1.0
CHECK_SECONDS = 2.0
_last_used: weakref.WeakKeyDictionary[psycopg.Connection, float] = weakref.WeakKeyDictionary()


def _check_if_idle(conn: psycopg.Connection) -> None:
    """Check a pooled connection only when it sat idle: a server restart is caught before a tool
    call uses it, while a burst of appends does not pay an extra round trip each. A server that
    does not answer the check within CHECK_SECONDS is treated as gone (the pool drops the connection)."""
    if time.monotonic() - _last_used.get(conn, 0.0) > IDLE_CHECK_SECONDS:
        with WATCHDOG.guard(conn, CHECK_SECONDS):
            ConnectionPool.check_connection(conn)


def _mark_used(conn: psycopg.Connection) -> None:
    _last_used[conn] = time.monotonic()


FUNCTION_ERRORS: dict[str, type[McpMemoryError]] = {
    "MM400": Invalid, "MM403": Forbidden, "MM404": NotFound, "MM409": Conflict,
}


@contextmanager
def translate_errors() -> Iterator[None]:
    """Driver failures → McpMemoryError, once, with the cause attached."""
    try:
        yield
    except McpMemoryError:
        raise
    except PoolTimeout as exc:
        raise Unavailable("database unreachable, retry later (no connection within the timeout)") from exc
    except psycopg.Error as exc:
        mapped = _translate(exc)
        if mapped is None:
            raise
        raise mapped from exc


# libpq's words for a refused login (no SQLSTATE reaches the client for these)
LOGIN_REFUSED = re.compile(r"authentication failed|role \".*\" does not exist|not permitted to log in|"
                           r"no pg_hba\.conf entry|password is required|no such user|"
                           r"terminating connection due to administrator command", re.IGNORECASE)


def _translate(exc: psycopg.Error) -> McpMemoryError | None:
    message = exc.diag.message_primary or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if exc.sqlstate in FUNCTION_ERRORS:  # raised by the write functions (migration 0007)
        return FUNCTION_ERRORS[exc.sqlstate](message)
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return Unavailable(f"the database schema is missing ({message}): run `mcp-memory db migrate`")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):  # a standby (hot standby), or read-only set
        return Unavailable(f"the database is read-only/standby and refuses writes ({message}): point the DSN "
                           "at the primary, or turn default_transaction_read_only off")
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return Forbidden(message or "permission denied")
    if isinstance(exc, psycopg.DataError):  # e.g. U+0000 in a text argument: the input, not the server
        return Invalid(f"a value cannot be stored: {str(exc).splitlines()[0]}")
    if isinstance(exc, psycopg.errors.QueryCanceled):
        return Unavailable(f"database busy, retry later (the statement was cancelled: {message}; "
                           "database.statement_timeout)")
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return Unavailable(f"database busy, retry later (a lock was not granted in time: {message}; "
                           "database.lock_timeout)")
    if isinstance(exc, psycopg.OperationalError) and LOGIN_REFUSED.search(str(exc)) \
            and "administrator command" not in str(exc):
        return Unauthorized("the database refused this login: the token was revoked, has expired or is unknown "
                            "(ask for a new one: mcp-memory token create / token rotate; then mcp-memory login)")
    if isinstance(exc, psycopg.OperationalError):
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Unavailable(f"database unreachable, retry later ({without_location(mask_dsn(reason))})")
    return None


# Where the database lives is the operator's business: errors reach REST and MCP clients, so the
# driver's reason keeps what went wrong ("Connection refused") without the host, port or socket path.
_LOCATIONS = (
    (re.compile(r'connection to server (?:at "[^"]*"(?:, port \d+)?|on socket "[^"]*")'),
     "connection to the database server"),
    (re.compile(r"""(?:could not translate host name|failed to resolve host) ["'][^"']*["']( to address)?"""),
     "could not resolve the database host name"),
    (re.compile(r"""\b(?:host|hostaddr|port)\s*[:=]\s*(?:'[^']*'|"[^"]*"|[^\s,;]+)"""), "…"),
)


def without_location(reason: str) -> str:
    for pattern, replacement in _LOCATIONS:
        reason = pattern.sub(replacement, reason)
    return reason
