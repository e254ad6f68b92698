"""The MCP transport: one tool per operation of mcp_memory/operations.py — its name, argument
schema, description and annotations come from the operation; the body validates the arguments
into the operation's input model, calls the core and returns the result as structured content and
as compact JSON text.

Errors leave as MCP tool errors whose text carries the stable `[code]`; argument validation
failures are rewritten as `[invalid] <field> <rule>` so that a model can correct itself.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError
from pydantic.fields import FieldInfo

from .. import __version__, jsoncheck
from ..errors import McpMemoryError, internal
from ..operations import OPERATIONS, Operation, call
from ..schema import describe_validation_error
from . import prompts, resources
from .clients import with_client_agent

# tool arguments whose strings may hold U+0000: message payloads, where the core replaces it
NUL_CLEANED = frozenset({"message", "messages"})

if TYPE_CHECKING:  # the server is built before the service: `serve` answers tools/list without psycopg
    from ..core.service import Service

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
Shared memory for coding agents: sessions of neutral (OpenAI-style) messages stored in PostgreSQL,
readable by any agent on any host. Typical use: create_session once per task, append_message for
each turn (give every message a unique append_id so retries are safe), read_session to catch up
(page with after_seq), create_snapshot before handing work over, load_snapshot to continue from a
snapshot in a new session (a fork; the original is never changed)."""

ANNOTATIONS = {
    "read": ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "write": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                             open_world_hint=False),
    "idempotent": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                  open_world_hint=False),
}


class MemoryServer(MCPServer):
    """MCPServer whose argument-validation errors carry the `[invalid]` code and name the field, and
    whose resources/list adds concrete memory:// resources (mcp/resources.py)."""

    get_service: Callable[[], Service] | None = None

    async def list_resources(self) -> list[Any]:
        """The templates' instances for the latest sessions; none when the database is not there
        (listing must not fail: reading a template's URI still works later)."""
        found = await super().list_resources()
        if self.get_service is None:
            return found
        get_service = self.get_service
        try:
            return found + await anyio.to_thread.run_sync(lambda: resources.listed(get_service()))
        except Exception as exc:  # noqa: BLE001 — a listing never fails: the templates remain
            coded = exc if isinstance(exc, McpMemoryError) else internal(exc, log)
            log.warning("resources/list without concrete resources: %s", coded.render())
            return found

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        # on every transport (stdio screens its lines before, HTTP and in-memory clients do not):
        # text PostgreSQL cannot hold is refused naming the field, not left to a driver error
        problem = jsoncheck.bad_text(arguments, [], nul_ok=NUL_CLEANED) if isinstance(arguments, dict) else None
        if problem:
            raise ToolError(f"[invalid] {problem}")
        if isinstance(arguments, dict):  # a session started by a known agent is labelled with it (clients.py)
            arguments = with_client_agent(name, arguments, context)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            while isinstance(cause, UnexpectedToolError):  # a nested tool's crash: look at what it wraps
                cause = cause.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(f"[invalid] {describe_validation_error(cause, prefix='')}") from cause
            coded = cause
            while coded is not None and not isinstance(coded, McpMemoryError):
                coded = coded.__cause__
            if coded is not None:  # the text is exactly "[code] message"
                raise ToolError(coded.render()) from coded
            if isinstance(exc, UnexpectedToolError):  # never the SDK's bare "Error executing tool …"
                raise ToolError(internal(cause or exc, log).render()) from cause
            raise


def _parameter(name: str, info: FieldInfo) -> inspect.Parameter:
    """A keyword parameter carrying the field's type, constraints and description (the SDK builds
    the tool's input schema and argument model from the signature)."""
    annotation: Any = Annotated[(info.annotation, *info.metadata, Field(description=info.description))]
    default = inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _tool(op: Operation, get_service: Callable[[], Service]) -> Callable[..., CallToolResult]:
    def run(**arguments: Any) -> CallToolResult:
        args = op.input.model_validate(arguments)
        try:
            result = call(get_service(), op, args)
        except McpMemoryError as exc:
            raise ToolError(exc.render()) from exc  # call_tool above strips the SDK's prefix
        data = result.model_dump(mode="json")
        # the text a model reads: compact, without the null fields (the structured copy has them all)
        return CallToolResult(content=[TextContent(type="text", text=result.model_dump_json(exclude_none=True))],
                              structured_content=data)

    run.__name__ = op.name
    run.__doc__ = op.description
    params = [_parameter(name, info) for name, info in op.input.model_fields.items()]
    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=Annotated[CallToolResult, op.result])
    return run


def build_server(get_service: Callable[[], Service]) -> MemoryServer:
    server = MemoryServer("mcp-memory", version=__version__, instructions=INSTRUCTIONS)
    for op in OPERATIONS:
        server.add_tool(_tool(op, get_service), name=op.name, title=op.title, description=op.description,
                        annotations=ANNOTATIONS[op.kind])
    server.get_service = get_service
    resources.register(server, get_service)
    prompts.register(server, get_service)
    return server
