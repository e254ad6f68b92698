"""Every operation of mcp-memory, declared once: its input model (fields, limits, enums and descriptions:
inputs.py), its result model, whether it reads or writes, and its REST method and path.

The MCP tools (mcp/server.py), the REST routes and `/openapi.json` (http/routes.py, http/openapi.py)
and the CLI arguments of the commands that mirror a tool (commands/cliargs.py) are built from this
table, and the Service method of the same name takes the same arguments (checked by
test_service_takes_the_arguments_of_each_input_model in tests/integration/transports/test_mcp.py; the
CLI side by tests/unit/test_operations.py), so the copies cannot drift. Pure pydantic: importing it
loads no database driver.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .core.query import QueryResult
from .digest_results import Digest
from .inputs import (
    AppendMessage,
    AppendMessages,
    CreateSession,
    CreateSnapshot,
    ExportSession,
    GetContext,
    GetDigest,
    ImportSession,
    Input,
    Kind,
    ListSessions,
    ListSnapshots,
    LoadSnapshot,
    QueryMemory,
    ReadSession,
    RecallHistory,
    RecordDecision,
    SearchDecisions,
    SearchMessages,
    SetContext,
    UpdateDecision,
    UpdateSessionMeta,
)
from .memory_results import (
    ContextOut,
    ContextSet,
    DecisionCreated,
    DecisionList,
    DecisionVersion,
    MatchList,
    Recall,
)
from .results import (
    AppendManyResult,
    AppendResult,
    CreatedSession,
    Exported,
    Forked,
    ImportResult,
    Page,
    SessionList,
    SessionOut,
    SnapshotCreated,
    SnapshotList,
)


# the table ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rest:
    method: str
    path: str
    status: int = 200
    also: tuple[str, ...] = ()  # further methods accepted on the same path (CONTRACT: GET for a fork)


@dataclass(frozen=True)
class Operation:
    name: str  # the MCP tool name, the REST operationId and the Service method
    title: str
    input: type[Input]
    result: type[BaseModel]
    kind: Kind
    rest: Rest
    wrap: str | None = None  # the result field that holds what the Service returns (else: its attributes)

    @property
    def description(self) -> str:
        """The input model's docstring, without its indentation (tool and OpenAPI descriptions)."""
        return " ".join(inspect.cleandoc(self.input.__doc__ or "").split())

    @property
    def reads(self) -> bool:
        return self.kind == "read"


OPERATIONS: tuple[Operation, ...] = (
    Operation("create_session", "Create session", CreateSession, CreatedSession, "write",
              Rest("POST", "/v1/sessions", 201)),
    Operation("append_message", "Append message", AppendMessage, AppendResult, "idempotent",
              Rest("POST", "/v1/sessions/{session_id}/message", 201)),
    Operation("append_messages", "Append messages", AppendMessages, AppendManyResult, "idempotent",
              Rest("POST", "/v1/sessions/{session_id}/messages", 201)),
    Operation("read_session", "Read session", ReadSession, Page, "read",
              Rest("GET", "/v1/sessions/{session_id}")),
    Operation("create_snapshot", "Create snapshot", CreateSnapshot, SnapshotCreated, "write",
              Rest("POST", "/v1/snapshots", 201)),
    Operation("list_snapshots", "List snapshots", ListSnapshots, SnapshotList, "read",
              Rest("GET", "/v1/sessions/{session_id}/snapshots"), wrap="snapshots"),
    Operation("load_snapshot", "Fork from snapshot", LoadSnapshot, Forked, "write",
              Rest("POST", "/v1/snapshots/{snapshot_id}/fork", 201, also=("GET",))),
    Operation("list_sessions", "List sessions", ListSessions, SessionList, "read",
              Rest("GET", "/v1/sessions")),
    Operation("update_session_meta", "Update session meta", UpdateSessionMeta, SessionOut, "idempotent",
              Rest("PATCH", "/v1/sessions/{session_id}"), wrap="session"),
    Operation("record_decision", "Record decision", RecordDecision, DecisionCreated, "write",
              Rest("POST", "/v1/decisions", 201)),
    Operation("update_decision", "Update decision", UpdateDecision, DecisionVersion, "write",
              Rest("PATCH", "/v1/decisions/{decision_id}")),
    Operation("search_decisions", "Search decisions", SearchDecisions, DecisionList, "read",
              Rest("GET", "/v1/decisions")),
    Operation("set_context", "Set session context", SetContext, ContextSet, "idempotent",
              Rest("POST", "/v1/sessions/{session_id}/context")),
    Operation("get_context", "Get session context", GetContext, ContextOut, "read",
              Rest("GET", "/v1/sessions/{session_id}/context")),
    Operation("search_messages", "Search messages", SearchMessages, MatchList, "read",
              Rest("GET", "/v1/search")),
    Operation("recall", "Recall history", RecallHistory, Recall, "read",
              Rest("GET", "/v1/recall")),
    Operation("get_digest", "Get digest", GetDigest, Digest, "read",
              Rest("GET", "/v1/digests")),
    Operation("export_session", "Export session to an agent", ExportSession, Exported, "write",
              Rest("POST", "/v1/sessions/{session_id}/export")),
    Operation("import_session", "Import an agent's session", ImportSession, ImportResult, "write",
              Rest("POST", "/v1/imports", 201)),
    Operation("query_memory", "Query memory with read-only SQL", QueryMemory, QueryResult, "read",
              Rest("POST", "/v1/query")),
)
BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}

# REST spells the search words `q` (README, REST); everywhere else they are `query`
REST_NAMES: dict[str, str] = {"query": "q"}


def arguments(args: Input) -> dict[str, Any]:
    """The validated fields, one level deep (nested models stay models), as Service keywords."""
    return {name: getattr(args, name) for name in type(args).model_fields}


def call(service: Any, op: Operation, args: Input) -> BaseModel:
    """Run an operation on the Service (the method of the operation's name, with its fields) and
    shape what it returns as the operation's result model."""
    value = getattr(service, op.name)(**arguments(args))
    if isinstance(value, op.result):
        return value
    if op.wrap is not None:
        return op.result.model_validate({op.wrap: value})
    return op.result.model_validate(value, from_attributes=True)
