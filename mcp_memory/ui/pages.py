"""The data of each review page, read through the token's core service and the UI store (read only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from ..core.search import check_time
from ..core.service import Service
from ..errors import Invalid
from ..memory_results import DecisionStatus, SearchMode
from ..schema import Message
from ..store import migrate, ui_store
from . import advice, lineage, render, titles

PAGE = 100  # messages per session page
LOOK_BACK = 20  # turns read before a page to name the calls its first tool results answer
STATUSES = ("proposed", "accepted", "rejected", "superseded")
MODES = ("fts", "semantic", "hybrid")


def _text(query: dict[str, str], name: str, limit: int = 200) -> str | None:
    value = (query.get(name) or "").strip()
    if len(value) > limit:
        raise Invalid(f"{name} must be at most {limit} characters")
    return value or None


def _int(query: dict[str, str], name: str, default: int = 0) -> int:
    value = query.get(name) or ""
    if not value:
        return default
    if not value.isdigit() or len(value) > 18:
        raise Invalid(f"{name} must be an integer ≥ 0")
    return int(value)


def page_start(seq: int) -> int:
    """The after_seq of the page that shows `seq` (links to #seq-N land on the right page)."""
    return max(seq - 1, 0) // PAGE * PAGE


def sessions_page(service: Service, query: dict[str, str], machine: str | None = None) -> dict[str, Any]:
    """`machine`: the host shown for the database owner's own writes that recorded none (ui_sessions)."""
    filters = {"project_id": _text(query, "project"), "agent_source": _text(query, "agent")}
    offset = _int(query, "offset")
    listing = ui_store.SessionFilter(**filters, host=_text(query, "host"), since=check_time(query.get("since"), "since"),
                                    until=check_time(query.get("until"), "until"), limit=50, offset=offset,
                                    owner_host=machine)
    rows, facets = ui_store.sessions(service.db, listing)
    result: dict[str, Any] = {"rows": rows, "facets": facets, "query": query, "offset": offset,
                              "more": len(rows) == listing.limit, "search": None}
    text = _text(query, "q", 500)
    if text:
        mode = _text(query, "mode")
        if mode is not None and mode not in MODES:
            raise Invalid(f"mode must be one of {', '.join(MODES)}")
        found = service.search_messages(text, mode=cast(SearchMode | None, mode), limit=50,
                                        hits_only=query.get("hits_only") == "1", project_id=filters["project_id"],
                                        agent_source=filters["agent_source"])
        result["search"] = {"mode": found.mode, "note": found.note, "matches": [
            {**m.model_dump(), "html": render.snippet(m.snippet), "start": page_start(m.seq)} for m in found.matches]}
    shown = rows + (found.matches if text else [])
    result["titles"] = titles.titles(service.db, titles.ids(shown, "session_id", "parent_session_id"))
    return result


@dataclass
class Marker:
    snapshot_id: int
    up_to_seq: int
    commit_msg: str
    archive: str


def _marker(row: dict[str, Any]) -> Marker:
    status = row["job_status"]
    if status == "done":
        commit = f", commit {row['commit_sha'][:12]}" if row.get("commit_sha") else ""
        archive = f"archived: tag snapshot-{row['snapshot_id']}{commit}"
    elif status == "failed":
        archive = f"archive failed: {row['last_error'] or 'no error recorded'}"
    else:
        archive = f"archive: {status or 'no export job'}"
    return Marker(row["snapshot_id"], row["up_to_seq"], row["commit_msg"], archive)


def session_page(service: Service, session_id: str, query: dict[str, str]) -> dict[str, Any]:
    session = service.get_session(session_id)
    after = _int(query, "after_seq")
    page = service.read_session(session_id, after_seq=after, limit=PAGE, view="full")
    markers: dict[int, list[Marker]] = {}
    for row in ui_store.snapshots(service.db, session_id):
        markers.setdefault(row["up_to_seq"], []).append(_marker(row))
    decisions = service.search_decisions(session_id=session_id, limit=100).decisions
    by_seq: dict[int, list[Any]] = {}
    for d in decisions:
        if d.message_seq is not None:
            by_seq.setdefault(d.message_seq, []).append(d)
    scaffolding = query.get("scaffold") == "1"
    full = _neutral(page.messages)
    named = titles.titles(service.db, [session_id, session.parent_session_id or ""])
    earlier = _earlier_memory_calls(service, session_id, after, full)
    return {"session": session, "title": named.get(session_id), "titles": named,
            "messages": render.timeline(full, show_scaffolding=scaffolding, earlier_calls=earlier),
            "markers": markers,
            "decisions": by_seq, "after": after, "older": max(after - PAGE, 0) if after > 0 else None,
            "newer": page.next_after_seq if page.has_more else None, "last_page": page_start(session.last_seq),
            "page_size": PAGE, "scaffolding": scaffolding, "keep": "&scaffold=1" if scaffolding else ""}


def _neutral(messages: list[Any]) -> list[Message]:
    return [m for m in messages if isinstance(m, Message)]  # view="full": neutral messages


def _earlier_memory_calls(service: Service, session_id: str, after: int, page: list[Message]) -> set[str]:
    """Memory-tool call ids among the turns just before this page, when a tool result at its top
    answers a call made there (a page may start between a call and its result)."""
    called = {c.id for m in page for c in (m.tool_calls or [])}
    if after == 0 or not any(m.role == "tool" and m.tool_call_id not in called for m in page):
        return set()
    start = max(after - LOOK_BACK, 0)
    before = service.read_session(session_id, after_seq=start, limit=after - start, view="full").messages
    return {c.id for m in _neutral(before) for c in (m.tool_calls or []) if render.is_memory_tool(c.function.name)}


def lineage_page(service: Service, session_id: str) -> dict[str, Any]:
    session = service.get_session(session_id)
    rows = ui_store.lineage(service.db, session_id)
    named = titles.titles(service.db, [session_id, *titles.ids(rows, "session_id")])
    graph = lineage.nodes(rows, session_id, named)
    return {"session": session, "title": named.get(session_id), "graph": graph, "svg": lineage.svg(graph)}


def decisions_page(service: Service, query: dict[str, str]) -> dict[str, Any]:
    status = _text(query, "status")
    if status is not None and status not in STATUSES:
        raise Invalid(f"status must be one of {', '.join(STATUSES)}")
    found = service.search_decisions(_text(query, "q", 500), status=cast(DecisionStatus | None, status),
                                     decision_type=_text(query, "type"),
                                     project_id=_text(query, "project"), agent_source=_text(query, "agent"),
                                     limit=100).decisions
    by_id = {d.decision_id: d for d in found}
    columns = {s: [d for d in found if d.status == s] for s in STATUSES if status in (None, s)}
    return {"columns": columns, "by_id": by_id, "query": query, "count": len(found),
            "titles": titles.titles(service.db, titles.ids(found, "session_id")),
            "start": {d.decision_id: page_start(d.message_seq or 1) for d in found}}


def health_page(service: Service) -> dict[str, Any]:
    health = ui_store.health(service.db)
    embeddings = service.embedding_status()
    return {"health": health, "embeddings": embeddings, "latest": migrate.latest_version(),
            "semantic_off": service.semantic_unavailable(),
            "queue_advice": advice.queue_advice(health.queue, health.archivers, health.oldest_waiting)}
