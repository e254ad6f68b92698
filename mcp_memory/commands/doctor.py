"""`mcp-memory doctor`: each check says what is wrong and what to do; non-zero exit on any failure."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from ..config import Settings
from ..errors import McpMemoryError
from ..store import health, migrate, partitions, replicas
from ..store.archive_store import ArchiveStore
from ..store.db import Database
from ..store.search_store import SearchStore
from ..store.sql import scalar
from ..store.standby import StandbyAsPrimary, check_not_standby
from ..ui.advice import queue_advice
from .output import print_json


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    warning: bool = False  # worth acting on, not a failure (the exit code stays 0)


def run(settings: Settings, args: argparse.Namespace) -> int:
    checks: list[Check] = [_config_check(settings)]
    database: dict[str, Any] = {"kind": "embedded" if settings.embedded else "external",
                                "dsn": settings.describe_dsn(), "server_version": None,
                                "schema_version": None, "pgvector": None, "search_backlog": None}
    db = Database(settings, application_name="mcp-memory doctor")
    try:
        if settings.embedded:
            db.ensure_schema()  # the embedded default is always migrated on first use
        with db.connect(autocommit=True) as conn:
            database["dsn"] = db.masked_dsn()
            database["server_version"] = scalar(conn, "SHOW server_version", what="SHOW server_version")
            check_not_standby(conn, settings)
            checks.append(Check("database", True, f"connected to PostgreSQL {database['server_version']}"))
            checks.append(_schema_check(conn, database))
            checks.append(_search_index_check(conn, database))
            checks.append(_pgvector_check(conn, database))
            checks.append(_connections_check(conn))
            checks.append(_queue_check(conn))
            checks.append(_partitions_check(conn))
    except StandbyAsPrimary as exc:  # its own words say what to do
        checks.append(Check("database", False, str(exc)))
    except McpMemoryError as exc:
        hint = ("the embedded server could not start; see its log under " + _embedded_data(settings)
                if settings.embedded else "check the DSN, the network and the password (keyring or MCP_MEMORY_PASSWORD)")
        checks.append(Check("database", False, f"{exc} — {hint}"))
    checks.append(_credentials_check(settings))
    checks.append(_capture_check(settings))
    checks.append(_keyring_check())
    checks.append(_archive_check(settings))
    checks.append(_pooler_check(settings))
    if settings.read_dsns:
        checks.append(_replicas_check(settings))
    checks.append(_semantic_check(settings))
    failed = [c for c in checks if not c.ok]
    if args.json:
        print_json({"database": database, "checks": [c.__dict__ for c in checks]})
    else:
        print(f"database: {database['kind']} {database['dsn']}")
        for c in checks:
            print(f"  [{'FAIL' if not c.ok else 'warn' if c.warning else 'ok'}] {c.name}: {c.detail}")
    return 1 if failed else 0


def _embedded_data(settings: Settings) -> str:
    """Where the embedded server keeps its data and log (as root: possibly under /var/lib/mcp-memory)."""
    from ..store.embedded import data_folder

    try:
        return str(data_folder(settings.embedded_dir))
    except (OSError, ValueError):
        return str(settings.embedded_dir)


def _capture_check(settings: Settings) -> Check:
    """The last capture hook run (commands/capture.py) and what waits in the spool."""
    import json

    from ..spool import Spool
    from .capture import LAST_RUN

    spool = Spool(settings.data_dir / "spool")
    pending, unreadable = spool.pending(), spool.unreadable()
    spooled = len(pending) + len(unreadable)
    reasons = sorted({p.reason for p in pending})
    waiting = (f"; {sum(len(p.sessions) for p in pending)} captured session(s) wait in the spool "
               f"({'; '.join(reasons[:3])}) — `mcp-memory spool list` shows them" if pending else "")
    if unreadable:
        waiting += (f"; {len(unreadable)} spool file(s) cannot be read and are never delivered "
                    f"({unreadable[0].name}: {unreadable[0].reason}) — `mcp-memory spool list` shows them")
    try:
        last = json.loads((settings.data_dir / LAST_RUN).read_text())
    except (OSError, ValueError):
        return Check("capture", True, "no capture hook has run here yet" + waiting, warning=bool(spooled))
    if last.get("ok"):
        return Check("capture", True, f"last hook run {last.get('at')} stored its turns" + waiting,
                     warning=bool(spooled))
    if last.get("code") == "forbidden":
        return Check("capture", False, f"the last hook run ({last.get('at')}) was refused: {last.get('error')} — "
                     "what it read waits in the spool; the next run after `mcp-memory login` with a valid token "
                     "delivers it" + waiting)
    return Check("capture", True, f"the last hook run ({last.get('at')}) failed: [{last.get('code')}] "
                 f"{last.get('error')} (see sync.log)" + waiting, warning=True)


def _pooler_check(settings: Settings) -> Check:
    """Behind PgBouncer (transaction mode), a LISTEN on a pooled connection hears nothing: live tail and
    read_session waits then poll, and the archiver refuses to start."""
    if not settings.pgbouncer:
        return Check("listen", True, "direct connection: live tail and waits wake on appends")
    if settings.direct_dsn:
        return Check("listen", True, "behind PgBouncer; LISTEN and the archiver's lease use [database] direct_dsn")
    return Check("listen", True, "behind PgBouncer without [database] direct_dsn: live tail and read_session waits "
                 "cannot hear appends (they read again every 0.5 s instead) and the archiver refuses to start — "
                 "set direct_dsn to a DSN that reaches PostgreSQL directly", warning=True)


def _replicas_check(settings: Settings) -> Check:
    """Each `[database] read_dsn`: reachable, a standby, within max_replica_lag. One that is not only
    costs the primary its reads (they fall back), so it is a warning."""
    found = [replicas.probe(settings, dsn) for dsn in settings.read_dsns]
    usable = all(ok for ok, _ in found)
    return Check("read replicas", True, "; ".join(detail for _, detail in found), warning=not usable)


def _config_check(settings: Settings) -> Check:
    source = {"flag": "--dsn", "env": "MCP_MEMORY_DSN", "config": f"config file {settings.config_path}",
              "embedded": "nothing configured: embedded default"}[settings.dsn_source]
    where = f"config file {settings.config_path}" if settings.config_path else "no config file"
    return Check("config", True, f"database from {source}; {where}; data dir {settings.data_dir}")


def _schema_check(conn, database: dict[str, Any]) -> Check:
    version = migrate.current_version(conn)
    latest = migrate.latest_version()
    database["schema_version"] = version
    if version >= latest:
        return Check("schema", True, f"version {version} (latest)")
    return Check("schema", False, f"version {version}, latest is {latest}: run `mcp-memory db migrate`")


def _search_index_check(conn, database: dict[str, Any]) -> Check:
    if (database["schema_version"] or 0) < 6:
        return Check("search index", True, "no progress table before schema version 6")
    sessions, messages = SearchStore(conn).backlog(None)
    database["search_backlog"] = {"sessions": sessions, "messages": messages}
    if not messages:
        return Check("search index", True, "up to date")
    return Check("search index", True, f"{messages} message(s) of {sessions} session(s) not indexed yet; the next "
                                       "search of their project indexes them, or run `mcp-memory reindex`")


def _queue_check(conn) -> Check:
    """Export jobs that wait while no archiver runs never drain: say so, and what to run (a warning:
    a machine without an archive is allowed)."""
    store = ArchiveStore(conn)
    try:
        counts = store.status_counts()
        oldest = store.oldest_pending()
        archivers = store.archivers()
    except psycopg.errors.InsufficientPrivilege:  # a gateway login reads no table
        return Check("archive queue", True, "not readable by this login (`mcp-memory archive status` as the owner "
                                            "or a token shows it)")
    advice = queue_advice(counts, archivers, oldest["created_at"] if oldest else None)
    waiting = counts.get("pending", 0) + counts.get("running", 0)
    if advice is None:
        return Check("archive queue", True, f"{waiting} export job(s) waiting" if waiting else "empty")
    return Check("archive queue", True, advice, warning=True)


def _partitions_check(conn) -> Check:
    """Month partitions (migration 0021): next month's must exist before it starts, or its sessions'
    rows land in the default partition until `db partitions` (or `db migrate`) moves them out."""
    state = partitions.upkeep(conn)
    if not state.partitioned:
        return Check("partitions", True, "messages is not partitioned before schema version 21")
    if state.partman_keeps:
        partman = "; pg_partman keeps the months (its maintenance runs with `mcp-memory db partitions`)"
    elif state.partman_available:
        partman = "; pg_partman is on the server but not used: `mcp-memory db partitions --partman` hands it the months"
    else:
        partman = ""
    if state.unhardened:
        return Check("partitions", True, f"{state.unhardened} partitions lack row-level security (made by pg_partman's "
                     "background worker): run `mcp-memory db partitions`" + partman, warning=True)
    if not state.next_month_ready or state.default_rows > 0:
        return Check("partitions", True, ("next month has no partition yet" if not state.next_month_ready else
                                          f"~{state.default_rows} rows wait in the default partition")
                     + ": run `mcp-memory db partitions` (monthly, e.g. from cron)" + partman, warning=True)
    return Check("partitions", True, "next month's partition is ready" + partman)


def _connections_check(conn) -> Check:
    """Connection slots: a server out of them refuses every host and token (superusers, like doctor
    itself, still get the reserved ones, so this is said before it happens)."""
    hidden = health.backends_hidden(conn)
    hiding = ("" if hidden is None else "; backends hidden from tokens" if hidden else
              "; backends NOT hidden from tokens: a gateway's pooled backends can see and end each other "
              "(run install/pgbouncer/auth_query.sql, or db migrate, as a superuser)")
    try:
        with conn.transaction():
            state = health.connections(conn)
    except psycopg.errors.InsufficientPrivilege:  # the owner's only (migration 0026)
        return Check("connections", True, "connection slots are visible to the owner only" + hiding)
    detail = (f"{state.used} of {state.usable} usable connection slots in use (max_connections "
              f"{state.max_connections}, {state.reserved} reserved)" + (f"; most: {state.top_holders}"
                                                                           if state.top_holders else "") + hiding)
    if state.low:
        return Check("connections", True, detail + " — running low: lower [database] pool_max on the hosts, "
                     "share connections with `serve-http` ([http] pool_max) or PgBouncer, or raise max_connections",
                     warning=True)
    return Check("connections", True, detail)


def _pgvector_check(conn, database: dict[str, Any]) -> Check:
    row = conn.execute(
        "SELECT default_version, installed_version FROM pg_available_extensions WHERE name = 'vector'"
    ).fetchone()
    database["pgvector"] = row is not None
    if row is None:
        return Check("pgvector", True, "not available on this server: semantic search is off, full-text search works")
    return Check("pgvector", True, f"available (version {row[0]})")


def _semantic_check(settings: Settings) -> Check:
    """Whether semantic/hybrid search can run, and if not, why (it is optional: never a failure)."""
    from ..wiring import build

    try:
        svc = build(settings, application_name="mcp-memory doctor")
    except McpMemoryError as exc:
        return Check("semantic search", False, f"[embeddings] config: {exc}")
    try:
        reason = svc.semantic_unavailable()
        if reason is not None:
            return Check("semantic search", True, f"off — {reason}; full-text search works")
        state = svc.embedding_status()
        return Check("semantic search", True, f"on: model {state.model} (dim {state.dim}), {state.vectors} "
                                              f"vector(s), {state.pending} message(s) pending")
    except McpMemoryError as exc:
        return Check("semantic search", True, f"off — {exc}")
    finally:
        svc.db.close()


def _credentials_check(settings: Settings) -> Check:
    """Where this host's password/token comes from (`mcp-memory login` stores it)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from ..credentials import file_password, keyring_password

    if settings.embedded:
        return Check("credentials", True, "embedded server: peer authentication on its private socket, no token needed")
    try:
        params = conninfo_to_dict(settings.dsn or "")
    except psycopg.ProgrammingError as exc:  # a malformed DSN
        return Check("credentials", False, f"the DSN cannot be parsed ({exc}): fix --dsn / MCP_MEMORY_DSN / config")
    if params.get("password"):
        source = "the DSN itself (prefer `mcp-memory login`: it keeps the token out of config files)"
    elif settings.password:
        source = "MCP_MEMORY_PASSWORD"
    elif keyring_password(settings.dsn or ""):
        source = "the OS keyring (mcp-memory login)"
    elif file_password(settings.dsn or "", settings.credentials_file):
        source = f"the 0600 file {settings.credentials_file} (no keyring on this host)"
    else:
        source = "nowhere: libpq falls back to ~/.pgpass or trust/peer auth; run `mcp-memory login --dsn …`"
    return Check("credentials", True, f"password/token from {source}")


def _keyring_check() -> Check:
    try:
        import keyring

        backend = keyring.get_keyring()
        name = type(backend).__name__
    except Exception as exc:  # keyring raises many backend-specific errors on headless hosts
        return Check("keyring", True, f"no usable keyring ({exc}); passwords come from env or the DSN")
    if name in ("FailKeyring", "NullKeyring") or "fail" in name.lower():
        return Check("keyring", True, "no keyring backend on this host; passwords come from env or the DSN")
    return Check("keyring", True, f"backend {name}")


def _archive_check(settings: Settings) -> Check:
    repo = settings.archive.get("repo")
    if not repo:
        return Check("archive", True, "no archive repo configured (only the archiver host needs one)")
    path = Path(str(repo)).expanduser()
    if (path / ".git").exists() or (path / "HEAD").exists():
        return Check("archive", True, f"repo {path}")
    if not path.exists():  # a standby's: the archiver makes it (from the remote) when it takes the lease
        source = " from [archive] remote" if settings.archive.get("remote") else ""
        return Check("archive", True, f"repo {path} not made yet: the archiver creates it{source} when it takes "
                     "the lease (a standby until then)")
    return Check("archive", False, f"archive repo {path} is not a git repository: run `mcp-memory archive --once`")
