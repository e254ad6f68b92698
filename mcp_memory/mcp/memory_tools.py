"""MCP tools for decisions, session context, search and recall (registered by build_server).

Descriptions are written for a model choosing a tool: when to use it, what comes back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.types import ToolAnnotations
from pydantic import Field

from ..memory_records import (
    Alternative,
    ContextOut,
    ContextSet,
    DecisionCreated,
    DecisionList,
    DecisionStatus,
    DecisionVersion,
    MatchList,
    Recall,
    Visibility,
)

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

SessionId = Annotated[str, Field(description="A session id, ses_<uuid>.")]
Project = Annotated[str | None, Field(description="Only this project (recommended: your repo's project id).")]
Agent = Annotated[str | None, Field(description="Only sessions of this agent_source (claude-code, opencode, …).")]
Since = Annotated[str | None, Field(description="Only from this time on: RFC 3339, a date, or an age like 7d / 12h.")]
Until = Annotated[str | None, Field(description="Only before this time (RFC 3339 or a date).")]
Query = Annotated[str, Field(description='A question or keywords in any language. Words are alternatives ranked by '
                                         'relevance; "quoted phrase" is required; -word excludes.')]


def register(server: Any, get_service: Callable[[], Any], *, errors: Callable) -> None:
    _register_decisions(server, get_service, errors)
    _register_context(server, get_service, errors)
    _register_search(server, get_service, errors)


def _register_decisions(server: Any, get_service: Callable[[], Any], errors: Callable) -> None:
    @server.tool(title="Record decision", annotations=WRITE)
    @errors
    def record_decision(
        session_id: SessionId,
        decision_type: Annotated[str, Field(description="Kind of decision: architecture, api, dependency, process, …")],
        summary: Annotated[str, Field(description="The decision in one sentence, e.g. 'Orders do not use a message queue yet'.")],
        status: Annotated[DecisionStatus, Field(description="accepted (default), rejected (an option turned down), "
                                                            "proposed, or superseded.")] = "accepted",
        rationale: Annotated[str | None, Field(description="Why — the reason the next agent needs.")] = None,
        message_seq: Annotated[int | None, Field(ge=1, description="seq of the message where it was decided.")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Free-form JSON object.")] = None,
        alternatives: Annotated[list[Alternative] | None, Field(description="Options considered: {option, why_not}.")] = None,
        supersedes: Annotated[str | None, Field(description="decision_id this one replaces; the old one is marked "
                                                             "superseded at once.")] = None,
        visibility: Annotated[Visibility, Field(description="private, team (default) or public.")] = "team",
    ) -> DecisionCreated:
        """Record a decision so later agents do not re-discuss it: what was decided (or rejected), why, and the
        options turned down. Record rejected options too (status=rejected). Returns decision_id and version."""
        return get_service().record_decision(
            session_id, decision_type, summary, status=status, rationale=rationale, message_seq=message_seq,
            metadata=metadata, alternatives=[a.model_dump() for a in alternatives] if alternatives else None,
            supersedes=supersedes, visibility=visibility)

    @server.tool(title="Update decision", annotations=WRITE)
    @errors
    def update_decision(
        decision_id: Annotated[str, Field(description="dec_… from record_decision or search_decisions.")],
        expected_version: Annotated[int, Field(ge=1, description="The version you read; [conflict] if it moved.")],
        status: Annotated[DecisionStatus | None, Field(description="New status.")] = None,
        summary: Annotated[str | None, Field(description="New summary.")] = None,
        rationale: Annotated[str | None, Field(description="New rationale.")] = None,
    ) -> DecisionVersion:
        """Change a decision's status, summary or rationale. Optimistic: pass the version you read; if someone
        changed it since, the answer is [conflict] — read it again with search_decisions and retry if still right."""
        return get_service().update_decision(decision_id, expected_version, status=status, summary=summary,
                                             rationale=rationale)

    @server.tool(title="Search decisions", annotations=READ)
    @errors
    def search_decisions(
        query: Annotated[str | None, Field(description="Keywords or a question (any language); omit to list.")] = None,
        status: Annotated[DecisionStatus | None, Field(description="Only this status, e.g. rejected.")] = None,
        decision_type: Annotated[str | None, Field(description="Only this decision_type.")] = None,
        project_id: Project = None,
        agent_source: Agent = None,
        since: Since = None,
        until: Until = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
    ) -> DecisionList:
        """Find earlier decisions (accepted, rejected, superseded, proposed) before proposing something: was this
        option already chosen or turned down, and why? Best match first; without a query, newest first."""
        return get_service().search_decisions(query, status=status, decision_type=decision_type, project_id=project_id,
                                              agent_source=agent_source, since=since, until=until, limit=limit)


def _register_context(server: Any, get_service: Callable[[], Any], errors: Callable) -> None:
    @server.tool(title="Set session context", annotations=IDEMPOTENT)
    @errors
    def set_context(
        session_id: SessionId,
        key: Annotated[str, Field(description="e.g. selected_stack, constraint, related_doc, task_goal.")],
        value: Annotated[Any, Field(description="Any JSON value; the previous value is kept as history.")],
    ) -> ContextSet:
        """Store a key fact of this session (chosen stack, constraint, related document, goal) for later agents."""
        return get_service().set_context(session_id, key, value)

    @server.tool(title="Get session context", annotations=READ)
    @errors
    def get_context(
        session_id: SessionId,
        key: Annotated[str | None, Field(description="One key (its history included); omit for all keys.")] = None,
    ) -> ContextOut:
        """Read a session's key facts (current values; with a key, also every earlier value)."""
        return get_service().get_context(session_id, key)


def _register_search(server: Any, get_service: Callable[[], Any], errors: Callable) -> None:
    @server.tool(title="Search messages", annotations=READ)
    @errors
    def search_messages(
        query: Query,
        project_id: Project = None,
        agent_source: Agent = None,
        role: Annotated[str | None, Field(description="Only user, assistant, tool or system messages.")] = None,
        session_id: Annotated[str | None, Field(description="Only this session (a fork: with its inherited history).")] = None,
        since: Since = None,
        until: Until = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        mode: Annotated[Literal["fts", "semantic", "hybrid"] | None, Field(
            description="fts (words), semantic (meaning) or hybrid (both); default hybrid when available.")] = None,
    ) -> MatchList:
        """Search earlier agents' messages (Chinese, English, code identifiers), best first, with highlighted
        snippets; by words and, where embeddings exist, by meaning (the result's `mode` says which ran). Ask in
        natural language; use read_session(session_id, after_seq=seq-3) to see the context of a match."""
        return get_service().search_messages(query, project_id=project_id, agent_source=agent_source, role=role,
                                             session_id=session_id, since=since, until=until, limit=limit,
                                             mode=mode)

    @server.tool(title="Recall history", annotations=READ)
    @errors
    def recall(
        query: Annotated[str, Field(description="The current task or question, in your user's language.")],
        project_id: Project = None,
        limit: Annotated[int, Field(ge=1, le=20)] = 5,
    ) -> Recall:
        """Start here on a new task: a short, prompt-ready block of what earlier sessions decided (with status:
        accepted / rejected / superseded) and discussed about it, each line dated. History may be stale."""
        return get_service().recall(query, project_id=project_id, limit=limit)
