"""Search over messages: the rules for its arguments, the fork lineage of a session, synonyms and
index maintenance. The ranking is mcp_memory/retrieval (its pipeline.py and README.md)."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, overload

from ..errors import Invalid, NotFound
from ..inputs import MAX_MATCHES, MAX_QUERY_CHARS
from ..schema import ROLES
from ..store.core_store import Store
from ..store.db import Database
from ..store.search_store import Scope, SearchStore
from .indexer import Indexer

MAX_LIMIT = MAX_MATCHES
_RELATIVE = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@overload
def check_query(query: Any) -> str: ...
@overload
def check_query(query: Any, *, required: Literal[True]) -> str: ...
@overload
def check_query(query: Any, *, required: bool) -> str | None: ...
def check_query(query: Any, *, required: bool = True) -> str | None:
    if query is None or (isinstance(query, str) and not query.strip() and not required):
        return None
    if not isinstance(query, str) or not query.strip():
        raise Invalid("query must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise Invalid(f"query must be at most {MAX_QUERY_CHARS} characters")
    return query


def check_limit(limit: Any, *, maximum: int = MAX_LIMIT) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= maximum:
        raise Invalid(f"limit must be an integer from 1 to {maximum}")
    return limit


def check_time(value: Any, field: str, *, now: datetime | None = None) -> datetime | None:
    """RFC 3339 / ISO 8601 (a date alone is midnight UTC), or a relative age: 30m, 12h, 7d, 2w."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise Invalid(f"{field} must be an RFC 3339 time or an age such as 7d")
    relative = _RELATIVE.match(value)
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2)
        try:
            return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
        except (OverflowError, ValueError):  # beyond datetime's years 1-9999
            raise Invalid(f"{field} {value} reaches before year 1: give an age of at most 9000 years") from None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise Invalid(f"{field} must be an RFC 3339 time (2026-01-31T12:00:00Z) or an age such as 7d") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def check_role(role: Any) -> str | None:
    if role is not None and role not in ROLES:
        raise Invalid("role must be one of " + ", ".join(ROLES))
    return role


def check_scope(
    *, project_id: str | None = None, agent_source: str | None = None, role: Any = None, since: Any = None,
    until: Any = None,
) -> Scope:
    return Scope(project_id=project_id, agent_source=agent_source, role=check_role(role),
                 since=check_time(since, "since"), until=check_time(until, "until"))


def with_session(conn: Any, scope: Scope, session_id: str | None) -> Scope:
    return scope if session_id is None else replace(scope, segments=_segments(Store(conn), session_id))


def _segments(store: Store, session_id: str) -> list[tuple[str, int, int]]:
    segments = store.lineage(session_id)
    if not segments:
        raise NotFound(f"session {session_id} does not exist")
    return [(s.session_id, s.lower, s.upper if s.upper is not None else 2**62) for s in segments]


# synonyms and index maintenance -------------------------------------------------------------------
def _synonym_terms(terms: Any, *, minimum: int) -> list[str]:
    if not isinstance(terms, (list, tuple)) or len(terms) < minimum:
        raise Invalid(f"give at least {minimum} term(s)")
    cleaned = []
    for term in terms:
        if not isinstance(term, str) or not term.strip() or len(term.strip()) > 200:
            raise Invalid("a synonym must be a non-empty string of at most 200 characters")
        cleaned.append(" ".join(term.split()).lower())
    return sorted(set(cleaned))


def add_synonyms(db: Database, terms: Any) -> list[list[str]]:
    """Make the terms (and the groups they already belong to) one group; returns all groups."""
    cleaned = _synonym_terms(terms, minimum=2)
    with db.transaction() as conn:
        store = SearchStore(conn)
        store.add_synonyms(cleaned)
        return store.synonym_groups()


def remove_synonyms(db: Database, terms: Any) -> list[str]:
    cleaned = _synonym_terms(terms, minimum=1)
    with db.transaction() as conn:
        return SearchStore(conn).remove_synonyms(cleaned)


def synonym_groups(db: Database) -> list[list[str]]:
    with db.transaction() as conn:
        return SearchStore(conn).synonym_groups()


def reindex(db: Database, project_id: str | None = None) -> int:
    """Index every stored message the search index does not have yet (restored rows, or a process
    that died before its indexing pass); returns how many."""
    return Indexer(db).reindex(project_id)
