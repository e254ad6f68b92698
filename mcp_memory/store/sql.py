"""Named queries, kept in `.sql` files (`-- name: query_name` then the statement), and the base of
the stores that run them."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg.sql import Composed

T = TypeVar("T")
_HEADER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


@cache
def queries() -> dict[str, str]:
    found: dict[str, str] = {}
    for entry in sorted(resources.files(__package__).joinpath("queries").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        chunks = _HEADER.split(entry.read_text(encoding="utf-8"))
        for name, body in zip(chunks[1::2], chunks[2::2], strict=True):
            if name in found:
                raise RuntimeError(f"query {name} is defined twice")
            found[name] = body.strip().rstrip(";")
    return found


def q(name: str) -> str:
    return queries()[name]


class MissingRow(RuntimeError):
    """A statement that always returns a row returned none: a bug or a broken schema, never a
    user error (so not an McpMemoryError)."""


def first_row(row: T | None, what: str) -> T:
    """The row of a statement that always returns one (an aggregate, a function call, …)."""
    if row is None:
        raise MissingRow(f"{what} returned no row")
    return row


def scalar(conn: psycopg.Connection, query: str, params: dict[str, Any] | None = None, *, what: str) -> Any:
    """The first column of the one row `query` returns; `what` names it in the error otherwise."""
    return first_row(conn.execute(query, params or {}).fetchone(), what)[0]


class Statements:
    """Named statements over one connection (inside the caller's transaction), rows as dicts.
    `prepare`: psycopg's choice by default (a statement run a few times is prepared); a store whose
    statements must be planned with their actual values each time sets it to False."""

    prepare: bool | None = None

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def _one(self, name: str, params: dict[str, Any] | None = None, *,
             prepare: bool | None = None) -> dict[str, Any] | None:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(q(name), params or {}, prepare=self.prepare if prepare is None else prepare).fetchone()

    def _all(self, name: str, params: dict[str, Any] | None = None, *,
             prepare: bool | None = None) -> list[dict[str, Any]]:
        return self._rows(q(name), params, prepare=prepare)

    def _rows(self, query: str | Composed, params: dict[str, Any] | None = None, *,
              prepare: bool | None = None) -> list[dict[str, Any]]:
        """The rows of a statement given as text or composed per call (filters.py)."""
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(query, params or {}, prepare=self.prepare if prepare is None else prepare).fetchall()
