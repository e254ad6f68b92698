"""Storing sessions read by an adapter: deterministic session ids, batched idempotent appends.

Importing the same native session again adds nothing: the session id derives from (project, agent,
native id) and every message's append_id from its native id, so each append is a duplicate.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..adapters.base import NeutralSession
from ..errors import Invalid, McpMemoryError, Unavailable
from ..store.imports_repo import ensure_session
from .service import Service
from .sessions import check_project

NAMESPACE = uuid.UUID("6f1c2b9e-4d0a-5b8e-9c3f-2a7d1e0b4c55")
BATCH = 1000


def imported_session_id(project_id: str, agent: str, native_id: str) -> str:
    name = "\x1f".join((project_id, agent, native_id))
    return f"ses_{uuid.uuid5(NAMESPACE, name)}"


@dataclass
class Imported:
    session_id: str
    native_id: str
    agent: str
    messages: int
    new: int = 0
    duplicates: int = 0
    redacted: int = 0
    created: bool = False
    report: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def store_sessions(
    service: Service, sessions: list[NeutralSession], *, project_id: str | None,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Imported]:
    """Store each session (parents before their sub-agent sessions); one failure does not stop the rest.
    Results come back in the order of `sessions`."""
    ids: dict[str, str] = {}
    results: dict[int, Imported] = {}
    order = sorted(range(len(sessions)), key=lambda i: sessions[i].parent_native_id is not None)
    for done, index in enumerate(order, 1):
        neutral = sessions[index]
        project = project_for(neutral, project_id)
        sid = imported_session_id(project, neutral.agent, neutral.native_id)
        ids[neutral.native_id] = sid
        result = Imported(session_id=sid, native_id=neutral.native_id, agent=neutral.agent,
                          messages=len(neutral.messages), report=neutral.report.to_dict() if neutral.report else {})
        try:
            _store(service, neutral, sid, project, ids.get(neutral.parent_native_id or ""), result)
        except Unavailable:
            raise  # the caller decides: fail, or spool for later (sync)
        except McpMemoryError as exc:
            result.error = exc.render()
        results[index] = result
        if on_progress:
            on_progress(done, len(sessions))
    return [results[i] for i in range(len(sessions))]


def project_for(neutral: NeutralSession, explicit: str | None) -> str:
    """--project, else the session's own project, else the last folder of its cwd, else 'default'."""
    if explicit:
        return check_project(explicit)
    candidates = [neutral.meta.get("project"), neutral.meta.get("project_id")]
    cwd = neutral.meta.get("cwd")
    if isinstance(cwd, str) and cwd.strip("/\\"):
        candidates.append(cwd.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1])
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return candidate[:200]
    return "default"


def _store(service: Service, neutral: NeutralSession, sid: str, project: str, parent_sid: str | None,
           result: Imported) -> None:
    meta = _json_safe({**neutral.meta, "native_id": neutral.native_id, "imported_from": neutral.agent})
    meta.setdefault("agent_source", neutral.agent)
    if neutral.parent_native_id:
        meta["parent"] = {"native_id": neutral.parent_native_id, "tool_call_id": neutral.parent_tool_call_id,
                          "session_id": parent_sid}
    title = meta.get("title") if isinstance(meta.get("title"), str) else None
    with service.db.transaction() as conn:
        _, result.created = ensure_session(conn, session_id=sid, project_id=project,
                                           agent_source=str(meta["agent_source"]), title=title, meta=meta)
    for start in range(0, len(neutral.messages), BATCH):
        chunk = neutral.messages[start:start + BATCH]
        appended = service.append_messages(sid, chunk)
        result.new += appended.duplicates.count(False)
        result.duplicates += appended.duplicates.count(True)
        result.redacted += appended.redacted


def _json_safe(meta: dict[str, Any]) -> dict[str, Any]:
    try:
        return json.loads(json.dumps(meta, default=str))
    except (TypeError, ValueError) as exc:
        raise Invalid(f"session meta is not JSON: {exc}") from None
