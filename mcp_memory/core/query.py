"""query_memory: one read-only SELECT over the views of schema mm_read (migration 0019).

What is refused, and where (README, "Read-only SQL"):
- here, before anything is sent (cheap, with a message naming the rule): an empty text, more than
  one statement, and anything that does not start as a query (SELECT, WITH, VALUES, TABLE or a
  parenthesised query); words inside strings, quoted names and comments do not count; then, on
  PostgreSQL's own parse tree (query_rules.py), any relation but the views, any function but the
  ordinary built-ins, any cast to a catalog type;
- in the database, whatever slipped through: the statement is opened as a cursor (a second
  statement cannot be), in a READ ONLY transaction (no write, no data-modifying WITH), inside a
  SECURITY DEFINER function owned by mcp_memory_reader (no change of role; only the views are
  readable; no write function, no superuser-only function), under a statement timeout.

Pure: the models and the lexical check load no database driver (operations.py imports them).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..errors import Invalid, Unavailable
from ..schema import Model
from .query_rules import VIEWS, check_tree

if TYPE_CHECKING:
    from ..store.db import Database

MAX_SQL_CHARS = 20_000
DEFAULT_ROWS = 100
MAX_ROWS = 1000
CELL_CHARS = 2000  # a longer value is cut and marked "…[cut: N chars]"
MAX_RESULT_CHARS = 1_000_000  # rows stop once their JSON passes this size (truncated)
DEFAULT_TIMEOUT = 3.0  # seconds; [query] statement_timeout in the config file
WORK_MEM = "16MB"
PER_CALLER = 2  # queries of one caller at once (a token over REST, the host's own login)
TURN_WAIT = 1.0  # seconds one more waits for a turn
STARTS = ("select", "with", "values", "table")


class QueryColumn(Model):
    name: str
    type: str = Field(description="The PostgreSQL type, e.g. text, bigint, timestamp with time zone, jsonb.")


class QueryResult(Model):
    columns: list[QueryColumn]
    rows: list[list[Any]] = Field(description="One list of JSON values per row, in the order of columns.")
    row_count: int
    truncated: bool = Field(description="More rows existed than `limit` (or than the output size bound) allowed.")
    cut_cells: int = Field(description=f"Values longer than {CELL_CHARS} characters, cut and marked "
                                       "'…[cut: N chars]'.")
    elapsed_ms: float


def check(sql: str) -> str:
    """The statement to send, or [invalid] naming the rule it breaks."""
    if len(sql) > MAX_SQL_CHARS:
        raise Invalid(f"sql must be at most {MAX_SQL_CHARS} characters")
    if "\x00" in sql:
        raise Invalid("sql must not contain NUL characters")
    words, semicolons = _scan(sql)
    if not words:
        raise Invalid("sql must be one SELECT statement; it is empty")
    if any(count < len(words) for count in semicolons):  # a ';' with more SQL after it
        raise Invalid("sql must be one statement: found ';' followed by more (one SELECT per call)")
    first = words[0].lower()
    if first != "(" and first not in STARTS:
        raise Invalid(f"sql must be a read-only query (SELECT, WITH … SELECT, VALUES or TABLE), not {words[0].upper()} "
                      f"(the views: {', '.join(VIEWS)})")
    check_tree(sql)
    return sql  # a trailing ';' (then blanks or comments only) is one statement for PostgreSQL too


_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<line>--[^\n]*)
  | (?P<block>/\*)
  | (?P<estring>[eE]'(?:[^'\\]|\\.|'')*'?)
  | (?P<string>'(?:[^']|'')*'?)
  | (?P<ident>"(?:[^"]|"")*"?)
  | (?P<dollar>\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$)
  | (?P<semi>;)
  | (?P<word>[A-Za-z_][A-Za-z_0-9$]*)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)


def _scan(sql: str) -> tuple[list[str], list[int]]:
    """The significant tokens (words and single characters; strings, quoted names and comments
    skipped) and, for each `;`, how many tokens came before it."""
    tokens: list[str] = []
    semicolons: list[int] = []
    i = 0
    while i < len(sql):
        m = _TOKEN.match(sql, i)
        assert m is not None  # `other` matches any character
        kind, i = m.lastgroup, m.end()
        if kind == "block":
            i = _block_end(sql, i)
        elif kind == "dollar":
            end = sql.find(m.group(), i)
            i = len(sql) if end < 0 else end + len(m.group())
            tokens.append("'")
        elif kind in ("estring", "string", "ident"):
            tokens.append(m.group()[0])
        elif kind == "semi":
            semicolons.append(len(tokens))
        elif kind in ("word", "other"):
            tokens.append(m.group())
    return tokens, semicolons


def _block_end(sql: str, i: int) -> int:
    """The end of a /* … */ comment that started before `i` (PostgreSQL nests them)."""
    depth = 1
    while depth and i < len(sql):
        if sql.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif sql.startswith("*/", i):
            depth, i = depth - 1, i + 2
        else:
            i += 1
    return i


def timeout_seconds(raw_config: dict[str, Any], call_timeout: float) -> float:
    """`[query] statement_timeout` (seconds, default 3), kept under the client's own cut-off
    (`[database] call_timeout`) so that the database's clear answer comes first."""
    section = raw_config.get("query") if isinstance(raw_config.get("query"), dict) else {}
    value = section.get("statement_timeout", DEFAULT_TIMEOUT) if section else DEFAULT_TIMEOUT
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise Invalid("[query] statement_timeout must be a number of seconds") from None
    if seconds <= 0:
        seconds = DEFAULT_TIMEOUT
    if call_timeout > 0:
        seconds = min(seconds, max(call_timeout - 1.0, 0.5))
    return seconds


def run(db: Database, sql: str, *, limit: int = DEFAULT_ROWS) -> QueryResult:
    """Check `sql`, then run it (store/query_store.py) as the reader of the caller's rows."""
    if not 1 <= limit <= MAX_ROWS:
        raise Invalid(f"limit must be between 1 and {MAX_ROWS}")
    statement = check(sql)
    from ..store import query_store  # the driver is loaded only when a query runs (module docstring)

    timeout = timeout_seconds(db.settings.raw, db.settings.call_timeout)
    with _turn(str(getattr(db, "role", "") or "")):
        return query_store.run(db, statement, rows=limit, timeout=timeout, cell_chars=CELL_CHARS,
                               max_chars=MAX_RESULT_CHARS, work_mem=WORK_MEM)


_turns: dict[str, threading.BoundedSemaphore] = {}
_turns_lock = threading.Lock()


@contextmanager
def _turn(caller: str) -> Iterator[None]:
    """At most PER_CALLER queries of one caller (a REST token's role; this process's own login)
    run at once, so that one token's parallel queries cannot take the shared pool from the others:
    one more waits up to TURN_WAIT seconds, then is told to retry."""
    with _turns_lock:
        turns = _turns.setdefault(caller, threading.BoundedSemaphore(PER_CALLER))
    if not turns.acquire(timeout=TURN_WAIT):
        raise Unavailable(f"query_memory: {PER_CALLER} queries of this caller are already running; "
                          "retry when one has finished")
    try:
        yield
    finally:
        turns.release()
