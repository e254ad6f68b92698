"""Storage for decisions, session context and agents (queries in queries/memory.sql)."""

from __future__ import annotations

from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from ..memory_results import Agent, ContextEntry, Decision
from ..schema import format_time
from .filters import composed, conditions
from .sql import Statements


class MemoryStore(Statements):
    # decisions ----------------------------------------------------------------------------------
    def insert_decision(self, **fields: Any) -> Decision:
        fields["alternatives"] = Jsonb(fields["alternatives"])
        fields["metadata"] = Jsonb(fields["metadata"])
        row = self._one("decision_insert", fields)
        assert row is not None  # INSERT … RETURNING
        return decision_record(row)

    def get_decision(self, decision_id: str) -> Decision | None:
        row = self._one("decision_get", {"decision_id": decision_id})
        return decision_record(row) if row else None

    def update_decision(self, decision_id: str, expected_version: int, **fields: Any) -> int:
        """The new version; [conflict] when the version moved (checked by the database)."""
        params = {**fields, "decision_id": decision_id, "expected_version": expected_version,
                  "alternatives": Jsonb(fields["alternatives"]), "metadata": Jsonb(fields["metadata"])}
        row = self._one("decision_update", params)
        assert row is not None  # a function call returns one row
        return int(row["version"])

    def search_decisions(self, params: dict[str, Any]) -> list[Decision]:
        # unprepared: the keyword's plan depends on its words (GIN index or newest first)
        query = composed("decision_search", filters=decision_filters(params))
        return [decision_record(row) for row in self._rows(query, params, prepare=False)]

    # session context ----------------------------------------------------------------------------
    def set_context(self, session_id: str, key: str, value: Any) -> tuple[int, str] | None:
        row = self._one("context_insert", {"session_id": session_id, "key": key, "value": Jsonb(value)})
        return (row["revision"], format_time(row["created_at"])) if row else None

    def current_context(self, session_id: str, key: str | None) -> list[ContextEntry]:
        query = composed("context_current", key=conditions([(key is not None, "key = %(key)s")]))
        rows = self._rows(query, {"session_id": session_id, "key": key})
        return [context_record(row) for row in rows]

    def context_history(self, session_id: str, key: str) -> list[ContextEntry]:
        return [context_record(row) for row in self._all("context_history", {"session_id": session_id, "key": key})]

    # agents -------------------------------------------------------------------------------------
    def latest_turns(self, project_id: str, *, sessions: int, cap: int) -> list[dict[str, Any]]:
        """The newest user and assistant turns of the project's latest sessions, newest first (rows)."""
        return self._all("recall_latest_turns", {"project_id": project_id, "sessions": sessions, "cap": cap})

    def list_agents(self) -> list[Agent]:
        return [Agent(name=r["name"], description=r["description"], created_at=format_time(r["created_at"]))
                for r in self._all("agent_list", {})]

    def describe_agent(self, name: str, description: str) -> Agent:
        row = self._one("agent_describe", {"name": name, "description": description})
        assert row is not None  # upsert … RETURNING
        return Agent(name=row["name"], description=row["description"], created_at=format_time(row["created_at"]))


def decision_filters(params: dict[str, Any]) -> sql.Composable:
    """The conditions of decision_search for the filters `params` gives (None: not given)."""
    given = {name for name, value in params.items() if value is not None}
    keyword = conditions([("match" in given, "d.tsv @@ %(match)s::tsquery"),
                          ("like" in given, "d.summary ILIKE %(like)s ESCAPE '\\'"),
                          ("like" in given, "d.rationale ILIKE %(like)s ESCAPE '\\'")], joiner=" OR ")
    return conditions([
        ("match" in given or "like" in given, keyword),
        ("exclude" in given, "NOT d.tsv @@ %(exclude)s::tsquery"),
        ("status" in given, "d.status = ANY(%(status)s::text[])"),
        ("decision_type" in given, "d.decision_type = %(decision_type)s"),
        ("project_id" in given, "d.project_id = %(project_id)s"),
        ("agent_source" in given, "s.agent_source = %(agent_source)s"),
        ("session_id" in given, "d.session_id = %(session_id)s"),
        ("since" in given, "d.created_at >= %(since)s"),
        ("until" in given, "d.created_at < %(until)s"),
    ])


def decision_record(row: dict[str, Any]) -> Decision:
    return Decision(
        decision_id=row["decision_id"],
        session_id=row["session_id"],
        project_id=row["project_id"],
        message_seq=row["message_seq"],
        decision_type=row["decision_type"],
        summary=row["summary"],
        status=row["status"],
        rationale=row["rationale"],
        alternatives=row["alternatives"],
        supersedes=row["supersedes"],
        superseded_by=row["superseded_by"],
        metadata=row["metadata"],
        visibility=row["visibility"],
        version=row["version"],
        agent_source=row.get("agent_source"),
        session_title=row.get("session_title"),
        created_at=format_time(row["created_at"]),
        updated_at=format_time(row["updated_at"]),
        score=float(row["score"]) if row.get("score") is not None else None,
    )


def context_record(row: dict[str, Any]) -> ContextEntry:
    return ContextEntry(key=row["key"], revision=row["revision"], value=row["value"],
                        created_at=format_time(row["created_at"]))
