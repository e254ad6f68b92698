"""Read queries of the review pages (mcp_memory/ui): named statements in queries/ui.sql, run on the
caller's (token role's) database, so row-level security limits every row to the token's projects."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .db import Database
from .filters import composed, conditions
from .sql import Statements

TREE_LIMIT = 200  # nodes drawn in one lineage graph
HOPS_LIMIT = 1000  # sessions whose hop titles one page asks for


@dataclass(frozen=True)
class SessionFilter:
    project_id: str | None = None
    agent_source: str | None = None
    host: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 50
    offset: int = 0
    owner_host: str | None = None  # the host of the database owner's own writes, when known (the embedded default)


@dataclass(frozen=True)
class Health:
    queue: dict[str, int]
    failed: list[dict[str, Any]]
    search_sessions: int
    search_messages: int
    schema_version: int
    archivers: list[dict[str, Any]]  # mm_archive_nodes(): the leader first, then standbys seen in the last day
    oldest_waiting: datetime | None  # the oldest pending or running export job's creation


class UiStore(Statements):
    def sessions(self, f: SessionFilter) -> list[dict[str, Any]]:
        query = composed("ui_sessions", filters=conditions([
            (f.project_id is not None, "s.project_id = %(project_id)s"),
            (f.agent_source is not None, "s.agent_source = %(agent_source)s"),
            (f.host is not None, "CASE WHEN s.created_by IN (SELECT rolname FROM owners) THEN coalesce(nullif("
                                 "s.meta ->> 'host', ''), %(owner_host)s::text, s.created_by) ELSE s.created_by END"
                                 " = %(host)s"),
            (f.since is not None, "coalesce(last.created_at, s.updated_at) >= %(since)s"),
            (f.until is not None, "coalesce(last.created_at, s.updated_at) < %(until)s"),
        ]))
        return self._rows(query, {"project_id": f.project_id, "agent_source": f.agent_source, "host": f.host,
                                  "since": f.since, "until": f.until, "limit": f.limit, "offset": f.offset,
                                  "owner_host": f.owner_host})

    def facets(self, owner_host: str | None = None) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {"project": [], "agent": [], "host": []}
        for row in self._all("ui_facets", {"owner_host": owner_host}):
            found[row["facet"]].append(row["value"])
        return found

    def hops(self, session_ids: list[str]) -> dict[str, dict[str, Any]]:
        rows = self._all("ui_hops", {"ids": sorted(set(session_ids))[:HOPS_LIMIT]})
        return {row["session_id"]: row for row in rows}

    def lineage(self, session_id: str) -> list[dict[str, Any]]:
        root = self._one("ui_lineage_root", {"session_id": session_id})
        if root is None:
            return []
        return self._all("ui_lineage_tree", {"root": root["session_id"], "limit": TREE_LIMIT})

    def snapshots(self, session_id: str) -> list[dict[str, Any]]:
        return self._all("ui_snapshots", {"session_id": session_id})

    def health(self) -> Health:
        backlog = self._one("ui_search_backlog") or {"sessions": 0, "messages": 0}
        version = self._one("ui_schema_version") or {"version": 0}
        oldest = self._one("ui_oldest_pending") or {"created_at": None}
        return Health(queue={row["status"]: row["jobs"] for row in self._all("ui_queue")},
                      failed=self._all("ui_failed_jobs"), search_sessions=int(backlog["sessions"]),
                      search_messages=int(backlog["messages"]), schema_version=int(version["version"]),
                      archivers=self._all("archive_nodes"), oldest_waiting=oldest["created_at"])


def sessions(db: Database, f: SessionFilter) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    with db.transaction() as conn:
        store = UiStore(conn)
        return store.sessions(f), store.facets(f.owner_host)


def hops(db: Database, session_ids: list[str]) -> dict[str, dict[str, Any]]:
    """session id → its title, agent, parent's title and number of readable ancestors (ui_hops)."""
    if not session_ids:
        return {}
    with db.transaction() as conn:
        return UiStore(conn).hops(session_ids)


def lineage(db: Database, session_id: str) -> list[dict[str, Any]]:
    with db.transaction() as conn:
        return UiStore(conn).lineage(session_id)


def snapshots(db: Database, session_id: str) -> list[dict[str, Any]]:
    with db.transaction() as conn:
        return UiStore(conn).snapshots(session_id)


def health(db: Database) -> Health:
    with db.transaction() as conn:
        return UiStore(conn).health()
