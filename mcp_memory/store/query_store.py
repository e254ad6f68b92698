"""Running one query_memory statement (core/query.py) through mm_read.query (migration 0019).

The transaction is READ ONLY; the work happens in a savepoint that is always rolled back, so a
setting the query changed (even set_config(…, false), which would outlive a commit on a pooled
connection) is undone, and session-level advisory locks it took are released before the
connection goes back to the pool. The column names and types come from a Describe of the cursor
mm_read.query leaves open: a Describe plans nothing and runs nothing.
"""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
from psycopg import pq

from ..core.query import QueryColumn, QueryResult
from ..errors import Invalid, McpMemoryError, Unavailable
from .db import Database
from .sql import first_row, q

CURSOR = b"mm_read_query"

# SQLSTATE → the rule the statement broke (the database's own words follow)
RULES: dict[str, str] = {
    "25006": "sql must only read (a SELECT)",
    "42P11": "sql must be one read-only query",
    "0A000": "sql must be one read-only query",
    "42501": "sql may read only the views of mm_read (sessions, messages, decisions, context, snapshots) and "
             "call built-in read-only functions",
    "57014": "",  # the timeout: its own message
}


def run(db: Database, statement: str, *, rows: int, timeout: float, cell_chars: int, max_chars: int,
        work_mem: str) -> QueryResult:
    started = time.monotonic()
    with db.transaction() as conn:
        conn.execute("SET TRANSACTION READ ONLY")
        try:
            with conn.transaction(force_rollback=True):
                conn.execute(q("query_limits"), {"timeout": f"{int(timeout * 1000)}ms", "work_mem": work_mem})
                if not first_row(conn.execute(q("query_function_present")).fetchone(), "query_function_present")[0]:
                    raise Unavailable("query_memory needs the role mcp_memory_reader (migration 0019): run "
                                      "`mcp-memory db migrate` as a role with CREATEROLE (the schema owner)")
                doc = _execute(conn, statement, rows, cell_chars, max_chars, timeout)
                columns = _columns(conn)
        finally:
            if not conn.broken:  # after a lost connection, the first error is the one to tell
                conn.execute("SELECT pg_catalog.pg_advisory_unlock_all()")
    result = doc if isinstance(doc, dict) else json.loads(doc)
    return QueryResult(columns=columns, rows=result["rows"], row_count=len(result["rows"]),
                       truncated=bool(result["more"]), cut_cells=int(result["cut"]),
                       elapsed_ms=round((time.monotonic() - started) * 1000, 1))


def _execute(conn: psycopg.Connection, statement: str, rows: int, cell_chars: int, max_chars: int,
             timeout: float) -> Any:
    """The function's JSON document; the statement's failures as [invalid] naming the rule."""
    try:
        with conn.transaction():
            row = conn.execute(q("query_run"), {"sql": statement, "rows": rows, "cell": cell_chars,
                                                "max": max_chars}, prepare=False).fetchone()
    except psycopg.Error as exc:
        raise _refusal(exc, timeout) from None
    return first_row(row, "query_run")[0]


def _refusal(exc: psycopg.Error, timeout: float) -> McpMemoryError:
    """A failed statement → [invalid] with the rule and the database's reason; a lost connection
    stays [unavailable]."""
    if isinstance(exc, psycopg.OperationalError) and not isinstance(exc, psycopg.errors.QueryCanceled):
        return Unavailable(f"database unreachable, retry later ({type(exc).__name__})")
    reason = exc.diag.message_primary or str(exc).splitlines()[0]
    state = exc.sqlstate or ""
    if state == "57014":
        return Invalid(f"query cancelled after {timeout:g} s (statement timeout, [query] statement_timeout): "
                       "narrow it (a WHERE on project_id or created_at, fewer joins) or ask for less")
    if state == "42501" and ("role" in reason or "session_authorization" in reason):
        return Invalid(f"sql may not change the role or the session authorization ({reason})")
    if state == "42501" and "for view" in reason:  # the views are readable, so this was a write or a lock
        return Invalid(f"sql must only read (no INSERT, UPDATE, DELETE or FOR UPDATE, also not inside WITH): {reason}")
    rule = RULES.get(state, "sql")
    hint = f" (hint: {exc.diag.message_hint})" if exc.diag.message_hint else ""
    return Invalid(f"{rule}: {reason}{hint}")


def _columns(conn: psycopg.Connection) -> list[QueryColumn]:
    """Names and types of the cursor's columns, from a Describe (nothing is executed)."""
    described = conn.pgconn.describe_portal(CURSOR)
    if described.status != pq.ExecStatus.COMMAND_OK:
        raise Unavailable("the query's columns could not be described: "
                          + (described.error_message or b"").decode("utf-8", "replace").strip())
    names = [(described.fname(i) or b"").decode("utf-8", "replace") for i in range(described.nfields)]
    oids = [described.ftype(i) for i in range(described.nfields)]
    mods = [described.fmod(i) for i in range(described.nfields)]
    types = [r[0] for r in conn.execute(q("query_type_names"), {"oids": oids, "mods": mods}).fetchall()] \
        if names else []
    return [QueryColumn(name=n, type=t) for n, t in zip(names, types, strict=True)]
