"""The REST routes of CONTRACT §4 as one table: each endpoint names its parameters, body and result
(the OpenAPI document is built from the same table) and calls one core method."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..core.service import Service
from ..errors import Invalid
from ..memory_records import DecisionCreated, DecisionList, DecisionVersion, MatchList
from ..records import (
    AppendManyResult,
    AppendResult,
    CreatedSession,
    Forked,
    Page,
    SessionList,
    SessionOut,
    SnapshotCreated,
    SnapshotList,
)


@dataclass(frozen=True)
class Param:
    name: str
    kind: str = "string"  # string | integer
    required: bool = False
    description: str = ""
    minimum: int | None = None
    maximum: int | None = None


@dataclass(frozen=True)
class Call:
    """What a request carries once parsed: path parameters, typed query parameters, JSON body."""

    path: dict[str, str]
    query: dict[str, Any]
    body: Any


@dataclass(frozen=True)
class Endpoint:
    methods: tuple[str, ...]
    path: str
    name: str
    summary: str
    run: Callable[[Service, Call], BaseModel]
    result: type[BaseModel] | tuple[type[BaseModel], ...]
    query: tuple[Param, ...] = ()
    body: dict[str, Any] | None = None  # JSON Schema of the body
    status: int = 200
    path_params: dict[str, str] = field(default_factory=dict)  # name -> "string" | "integer"


def _object(body: Any, *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise Invalid("body must be a JSON object")
    for name in required:
        if name not in body:
            raise Invalid(f"body.{name} is required")
    _no_nul(body, "body")
    return body


def _no_nul(value: Any, path: str) -> None:
    """PostgreSQL text cannot hold U+0000: say which field has one (message payloads are cleaned
    by the core instead, so the append route does not call this)."""
    if isinstance(value, str) and "\x00" in value:
        raise Invalid(f"{path} must not contain U+0000")
    if isinstance(value, dict):
        for key, item in value.items():
            _no_nul(key, f"{path} key")
            _no_nul(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_nul(item, f"{path}[{index}]")


def _only(body: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise Invalid(f"body.{unknown[0]} is not a known field (allowed: {', '.join(sorted(allowed))})")
    return body


def _snapshot_id(call: Call) -> int:
    raw = call.path["snapshot_id"]
    if not raw.isdigit() or int(raw) < 1:
        raise Invalid("snapshot_id must be a positive integer")
    return int(raw)


def _append(svc: Service, call: Call) -> BaseModel:
    if not isinstance(call.body, dict):
        raise Invalid("body must be a JSON object (a message, or {\"messages\": [...]})")
    body = call.body
    if "messages" in body and "role" not in body:
        return svc.append_messages(call.path["session_id"], _only(body, {"messages"})["messages"])
    return svc.append_message(call.path["session_id"], body)


def _create_session(svc: Service, call: Call) -> BaseModel:
    body = _only(_object(call.body, required=("project_id",)), {"project_id", "meta"})
    return CreatedSession(session_id=svc.create_session(body["project_id"], body.get("meta")).session_id)


def _update_session(svc: Service, call: Call) -> BaseModel:
    body = _only(_object(call.body, required=("meta",)), {"meta"})
    return SessionOut(session=svc.update_session_meta(call.path["session_id"], body["meta"]))


def _create_snapshot(svc: Service, call: Call) -> BaseModel:
    body = _only(_object(call.body, required=("session_id",)), {"session_id", "commit_msg"})
    if not isinstance(body["session_id"], str):
        raise Invalid("body.session_id must be a string")
    snap = svc.create_snapshot(body["session_id"], body.get("commit_msg", ""))
    return SnapshotCreated(snapshot_id=snap.snapshot_id, up_to_seq=snap.up_to_seq)


def _fork(svc: Service, call: Call) -> BaseModel:
    body = _only(_object(call.body if call.body is not None else {}), {"meta"})
    return svc.load_snapshot(_snapshot_id(call), body.get("meta"))


DECISION_FIELDS = {"session_id", "decision_type", "summary", "status", "rationale", "message_seq", "metadata",
                   "alternatives", "supersedes", "visibility"}
UPDATE_FIELDS = {"expected_version", "status", "summary", "rationale", "alternatives", "metadata"}


def _record_decision(svc: Service, call: Call) -> BaseModel:
    body = _only(_object(call.body, required=("session_id", "decision_type", "summary")), DECISION_FIELDS)
    options = {k: v for k, v in body.items() if k not in ("session_id", "decision_type", "summary")}
    if not isinstance(body["session_id"], str):
        raise Invalid("body.session_id must be a string")
    return svc.record_decision(body["session_id"], body["decision_type"], body["summary"], **options)


def _update_decision(svc: Service, call: Call) -> BaseModel:
    body = _only(_object(call.body, required=("expected_version",)), UPDATE_FIELDS)
    changes = {k: v for k, v in body.items() if k != "expected_version"}
    return svc.update_decision(call.path["decision_id"], body["expected_version"], **changes)


def _with_q(search: Callable[..., BaseModel], call: Call) -> BaseModel:
    """The core calls the search words `query`; here they are the `q` parameter."""
    filters = {k: v for k, v in call.query.items() if k != "q" and v is not None}
    try:
        return search(call.query.get("q"), **filters)
    except Invalid as exc:
        if str(exc).startswith("query"):
            raise Invalid(f"query parameter q: {exc}") from exc
        raise


def _search(svc: Service, call: Call) -> BaseModel:
    return _with_q(svc.search_messages, call)


def _search_decisions(svc: Service, call: Call) -> BaseModel:
    return _with_q(svc.search_decisions, call)


_LIMIT = Param("limit", "integer", minimum=1, maximum=200, description="Page size.")
_TEXT = {"type": "string"}
_OBJ = {"type": "object"}
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(("POST",), "/v1/sessions", "create_session", "Create a session", _create_session, CreatedSession,
             body={"type": "object", "required": ["project_id"], "additionalProperties": False,
                   "properties": {"project_id": {"type": "string", "minLength": 1, "maxLength": 200},
                                  "meta": _OBJ}}, status=201),
    Endpoint(("GET",), "/v1/sessions", "list_sessions", "List sessions, newest first",
             lambda svc, c: svc.list_sessions(**c.query), SessionList,
             query=(Param("project_id"), Param("agent_source"), _LIMIT, Param("cursor"))),
    Endpoint(("PATCH",), "/v1/sessions/{session_id}", "update_session_meta", "Merge keys into a session's meta",
             _update_session, SessionOut,
             body={"type": "object", "required": ["meta"], "additionalProperties": False,
                   "properties": {"meta": _OBJ}}),
    Endpoint(("GET",), "/v1/sessions/{session_id}", "read_session", "Read a session's messages in seq order",
             lambda svc, c: svc.read_session(c.path["session_id"], **c.query), Page,
             query=(Param("after_seq", "integer", minimum=0),
                    Param("limit", "integer", minimum=1, maximum=1000))),
    Endpoint(("POST",), "/v1/sessions/{session_id}/messages", "append_messages",
             "Append one message, or {\"messages\": [...]} in one transaction", _append,
             (AppendResult, AppendManyResult), body={"type": "object"}, status=201),
    Endpoint(("GET",), "/v1/sessions/{session_id}/snapshots", "list_snapshots", "List a session's snapshots",
             lambda svc, c: SnapshotList(snapshots=svc.list_snapshots(c.path["session_id"])), SnapshotList),
    Endpoint(("POST",), "/v1/snapshots", "create_snapshot", "Snapshot a session", _create_snapshot,
             SnapshotCreated, status=201,
             body={"type": "object", "required": ["session_id"], "additionalProperties": False,
                   "properties": {"session_id": _TEXT, "commit_msg": _TEXT}}),
    Endpoint(("POST", "GET"), "/v1/snapshots/{snapshot_id}/fork", "load_snapshot",
             "Fork a snapshot into a new session", _fork, Forked, status=201,
             body={"type": "object", "additionalProperties": False, "properties": {"meta": _OBJ}},
             path_params={"snapshot_id": "integer"}),
    Endpoint(("GET",), "/v1/search", "search_messages", "Search messages", _search, MatchList,
             query=(Param("q", required=True, description="Search words"), Param("project_id"),
                    Param("agent_source"), Param("role"), Param("session_id"), Param("since"), Param("until"),
                    Param("limit", "integer", minimum=1, maximum=100),
                    Param("mode", description="fts, semantic or hybrid (default: hybrid when available)"))),
    Endpoint(("POST",), "/v1/decisions", "record_decision", "Record a decision", _record_decision,
             DecisionCreated, status=201,
             body={"type": "object", "required": ["session_id", "decision_type", "summary"],
                   "properties": {"session_id": _TEXT, "decision_type": _TEXT, "summary": _TEXT,
                                  "status": {"enum": ["accepted", "rejected", "superseded"]},
                                  "rationale": _TEXT, "message_seq": {"type": "integer"}, "metadata": _OBJ,
                                  "visibility": {"enum": ["private", "team", "public"]}}}),
    Endpoint(("PATCH",), "/v1/decisions/{decision_id}", "update_decision", "Update a decision (optimistic)",
             _update_decision, DecisionVersion,
             body={"type": "object", "required": ["expected_version"],
                   "properties": {"expected_version": {"type": "integer"}, "status": _TEXT, "summary": _TEXT,
                                  "rationale": _TEXT}}),
    Endpoint(("GET",), "/v1/decisions", "search_decisions", "Search decisions", _search_decisions, DecisionList,
             query=(Param("q"), Param("status"), Param("decision_type"), Param("project_id"),
                    Param("agent_source"), Param("session_id"), Param("since"), Param("until"),
                    Param("limit", "integer", minimum=1, maximum=100))),
)


def parse_path(raw: dict[str, str]) -> dict[str, str]:
    for name, value in raw.items():
        if "\x00" in value:
            raise Invalid(f"{name} must not contain U+0000")
    return raw


def parse_query(params: tuple[Param, ...], raw: dict[str, str]) -> dict[str, Any]:
    """Typed query parameters; every rejection names the parameter."""
    known = {p.name for p in params}
    for name in raw:
        if name not in known:
            raise Invalid(f"query parameter {name} is not known here (allowed: {', '.join(sorted(known)) or 'none'})")
    values: dict[str, Any] = {}
    for p in params:
        value = raw.get(p.name)
        if value is not None and "\x00" in value:
            raise Invalid(f"query parameter {p.name} must not contain U+0000")
        if value is None:
            if p.required:
                raise Invalid(f"query parameter {p.name} is required")
            continue
        values[p.name] = _typed(p, value)
    return values


def _typed(p: Param, value: str) -> Any:
    if p.kind != "integer":
        return value
    try:
        number = int(value)
    except ValueError:
        raise Invalid(f"query parameter {p.name} must be an integer") from None
    if (p.minimum is not None and number < p.minimum) or (p.maximum is not None and number > p.maximum):
        raise Invalid(f"query parameter {p.name} must be from {p.minimum} to {p.maximum}")
    return number
