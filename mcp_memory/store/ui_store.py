"""Read queries of the review pages (mcp_memory/ui): named statements in queries/ui.sql, run on the
caller's (token role's) database, so row-level security limits every row to the token's projects."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .db import Database
from .sql import Statements

TREE_LIMIT = 200  # nodes drawn in one lineage graph


@dataclass(frozen=True)
class SessionFilter:
    project_id: str | None = None
    agent_source: str | None = None
    host: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 50
    offset: int = 0


@dataclass(frozen=True)
class Health:
    queue: dict[str, int]
    failed: list[dict[str, Any]]
    search_sessions: int
    search_messages: int
    schema_version: int


class UiStore(Statements):
    def sessions(self, f: SessionFilter) -> list[dict[str, Any]]:
        return self._all("ui_sessions", {"project_id": f.project_id, "agent_source": f.agent_source, "host": f.host,
                                         "since": f.since, "until": f.until, "limit": f.limit, "offset": f.offset})

    def facets(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {"project": [], "agent": [], "host": []}
        for row in self._all("ui_facets"):
            found[row["facet"]].append(row["value"])
        return found

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
        return Health(queue={row["status"]: row["jobs"] for row in self._all("ui_queue")},
                      failed=self._all("ui_failed_jobs"), search_sessions=int(backlog["sessions"]),
                      search_messages=int(backlog["messages"]), schema_version=int(version["version"]))


def sessions(db: Database, f: SessionFilter) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    with db.transaction() as conn:
        store = UiStore(conn)
        return store.sessions(f), store.facets()


def lineage(db: Database, session_id: str) -> list[dict[str, Any]]:
    with db.transaction() as conn:
        return UiStore(conn).lineage(session_id)


def snapshots(db: Database, session_id: str) -> list[dict[str, Any]]:
    with db.transaction() as conn:
        return UiStore(conn).snapshots(session_id)


def health(db: Database) -> Health:
    with db.transaction() as conn:
        return UiStore(conn).health()
