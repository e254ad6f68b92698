"""The MCP transport: one small function per tool — parse, call the core, return its record.

Errors leave as MCP tool errors whose text carries the stable `[code]` (CONTRACT §3); argument
validation failures are rewritten as `[invalid] <field> <rule>` so that a model can correct itself.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from .. import __version__, jsoncheck
from ..errors import McpMemoryError
from ..models import MessageIn, describe_validation_error
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

# tool arguments whose strings may hold U+0000: message payloads, where the core replaces it
NUL_CLEANED = frozenset({"message", "messages"})

if TYPE_CHECKING:  # the server is built before the service: `serve` answers tools/list without psycopg
    from ..core.service import Service

log = logging.getLogger(__name__)
T = TypeVar("T")

INSTRUCTIONS = """\
Shared memory for coding agents: sessions of neutral (OpenAI-style) messages stored in PostgreSQL,
readable by any agent on any host. Typical use: create_session once per task, append_message for
each turn (give every message a unique append_id so retries are safe), read_session to catch up
(page with after_seq), create_snapshot before handing work over, load_snapshot to continue from a
snapshot in a new session (a fork; the original is never changed)."""

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

SessionId = Annotated[str, Field(description="A session id, ses_<uuid>.")]
Meta = Annotated[
    dict[str, Any] | None,
    Field(description="Free-form session metadata: title, agent_source, cwd, model, … (JSON object)."),
]


class MemoryServer(MCPServer):
    """MCPServer whose argument-validation errors carry the `[invalid]` code and name the field."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        # on every transport (stdio screens its lines before, HTTP and in-memory clients do not):
        # text PostgreSQL cannot hold is refused naming the field, not left to a driver error
        problem = jsoncheck.bad_text(arguments, [], nul_ok=NUL_CLEANED) if isinstance(arguments, dict) else None
        if problem:
            raise ToolError(f"[invalid] {problem}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError):
                raise
            if isinstance(cause, ValidationError):
                raise ToolError(f"[invalid] {describe_validation_error(cause, prefix='')}") from cause
            while cause is not None and not isinstance(cause, McpMemoryError):
                cause = cause.__cause__
            if cause is not None:  # the text is exactly "[code] message"
                raise ToolError(cause.render()) from cause
            raise


def _errors(fn: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except McpMemoryError as exc:
            raise ToolError(exc.render()) from exc  # call_tool above strips the SDK's prefix

    return wrapper


def build_server(get_service: Callable[[], Service]) -> MemoryServer:
    server = MemoryServer("mcp-memory", version=__version__, instructions=INSTRUCTIONS)

    @server.tool(title="Create session", annotations=WRITE)
    @_errors
    def create_session(
        project_id: Annotated[str, Field(description="Project the session belongs to (e.g. the repo name).")],
        meta: Meta = None,
    ) -> CreatedSession:
        """Start a new shared session and return its session_id. Put title, agent_source (your agent's
        name) and cwd in meta so other agents can find it."""
        return CreatedSession(session_id=get_service().create_session(project_id, meta).session_id)

    @server.tool(title="Append message", annotations=IDEMPOTENT)
    @_errors
    def append_message(session_id: SessionId, message: MessageIn) -> AppendResult:
        """Append one neutral message (role system|user|assistant|tool; content; tool_calls; tool_call_id;
        thinking) to a session. The server assigns seq. Retrying with the same append_id and payload
        returns the original seq with duplicate=true; the same append_id with another payload is a
        [conflict]."""
        return get_service().append_message(session_id, message)

    @server.tool(title="Append messages", annotations=IDEMPOTENT)
    @_errors
    def append_messages(
        session_id: SessionId,
        messages: Annotated[list[MessageIn], Field(description="Messages in order; stored in one transaction.")],
    ) -> AppendManyResult:
        """Append several messages atomically (all or nothing), in order. Same idempotency rules as
        append_message, per message."""
        return get_service().append_messages(session_id, messages)

    @server.tool(title="Read session", annotations=READ)
    @_errors
    def read_session(
        session_id: SessionId,
        after_seq: Annotated[int, Field(ge=0, description="Return messages with seq > after_seq.")] = 0,
        limit: Annotated[int, Field(ge=1, le=1000, description="Page size (max 1000).")] = 100,
    ) -> Page:
        """Read a session's history in seq order, a page at a time: pass next_after_seq back as after_seq
        while has_more is true. A forked session includes its parent's history up to the fork."""
        return get_service().read_session(session_id, after_seq=after_seq, limit=limit)

    @server.tool(title="Create snapshot", annotations=WRITE)
    @_errors
    def create_snapshot(
        session_id: SessionId,
        commit_msg: Annotated[str, Field(description="What this point in the session is (like a commit message).")] = "",
    ) -> SnapshotCreated:
        """Mark the session's current end as a snapshot (a pointer, no copy); it is archived to git
        asynchronously. Use before handing the work to another agent."""
        snapshot = get_service().create_snapshot(session_id, commit_msg)
        return SnapshotCreated(snapshot_id=snapshot.snapshot_id, up_to_seq=snapshot.up_to_seq)

    @server.tool(title="List snapshots", annotations=READ)
    @_errors
    def list_snapshots(session_id: SessionId) -> SnapshotList:
        """List a session's snapshots, oldest first."""
        return SnapshotList(snapshots=get_service().list_snapshots(session_id))

    @server.tool(title="Fork from snapshot", annotations=WRITE)
    @_errors
    def load_snapshot(
        snapshot_id: Annotated[int, Field(ge=1, description="The snapshot to continue from.")],
        meta: Meta = None,
    ) -> Forked:
        """Continue from a snapshot in a NEW session (a fork): it starts with the original's history up
        to the snapshot and never changes the original. Returns the new session_id."""
        return get_service().load_snapshot(snapshot_id, meta)

    @server.tool(title="List sessions", annotations=READ)
    @_errors
    def list_sessions(
        project_id: Annotated[str | None, Field(description="Only this project.")] = None,
        agent_source: Annotated[str | None, Field(description="Only sessions of this agent.")] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page.")] = None,
    ) -> SessionList:
        """List sessions, newest first, optionally by project and agent; page with next_cursor."""
        return get_service().list_sessions(project_id=project_id, agent_source=agent_source, limit=limit,
                                           cursor=cursor)

    @server.tool(title="Update session meta", annotations=IDEMPOTENT)
    @_errors
    def update_session_meta(
        session_id: SessionId,
        meta: Annotated[dict[str, Any], Field(description="Keys to set (merged); a key set to null is removed.")],
    ) -> SessionOut:
        """Merge keys into a session's metadata (title, status, notes for the next agent …)."""
        return SessionOut(session=get_service().update_session_meta(session_id, meta))

    from . import memory_tools

    memory_tools.register(server, get_service, errors=_errors)
    return server
