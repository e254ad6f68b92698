"""The MCP transport: one tool per operation of mcp_memory/operations.py — its name, argument
schema, description and annotations come from the operation (listed from tools.json, generated from
the operations: mcp/tool_list.py); a call validates the arguments once, into the operation's input
model, runs the core in a worker thread and returns the result as structured content and as compact
JSON text.

Errors leave as MCP tool errors whose text carries the stable `[code]`; argument validation
failures are `[invalid] <field> <rule>` so that a model can correct itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import CallToolResult, TextContent, Tool
from pydantic import ValidationError

from .. import __version__, jsoncheck
from ..errors import McpMemoryError, internal
from ..operations import OPERATIONS, Operation, call
from ..schema import describe_validation_error
from . import prompts, resources, threads, tool_list
from .clients import with_client_agent

# tool arguments whose strings may hold U+0000: message payloads, where the core replaces it
NUL_CLEANED = frozenset({"message", "messages"})
BY_NAME = {op.name: op for op in OPERATIONS}

if TYPE_CHECKING:  # the server is built before the service: `serve` answers tools/list without psycopg
    from ..core.service import Service

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
Shared memory for coding agents: sessions of neutral (OpenAI-style) messages stored in PostgreSQL,
readable by any agent on any host. Typical use: create_session once per task, append_message for
each turn (give every message a unique append_id so retries are safe), read_session to catch up
(page with after_seq), create_snapshot before handing work over, load_snapshot to continue from a
snapshot in a new session (a fork; the original is never changed)."""


class MemoryServer(MCPServer):
    """MCPServer whose tools are the operations (listed from tools.json, called through the input
    models), and whose resources/list adds concrete memory:// resources (mcp/resources.py)."""

    get_service: Callable[[], Service] | None = None
    screened = False  # the transport screened every request's text before (the stdio wire does)

    async def list_tools(self) -> list[Tool]:
        return list(tool_list.tools())

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        return tool_list.input_schemas().get(name)

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

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError as exc:  # no template matches the URI
            raise resources.unknown(str(uri)) from exc

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        op = BY_NAME.get(name)
        if op is None:
            raise ToolError(f"Unknown tool: {name}")
        if not isinstance(arguments, dict):
            raise ToolError("[invalid] arguments must be a JSON object")
        # on every transport (stdio screens its lines before, HTTP and in-memory clients do not):
        # text PostgreSQL cannot hold is refused naming the field, not left to a driver error
        problem = None if self.screened else jsoncheck.bad_text(arguments, [], nul_ok=NUL_CLEANED)
        if problem:
            raise ToolError(f"[invalid] {problem}")
        # a session started by a known agent is labelled with it (clients.py)
        arguments = with_client_agent(name, arguments, context)
        try:
            args = op.input.model_validate(_known(op, arguments))
        except ValidationError as exc:
            raise ToolError(f"[invalid] {describe_validation_error(exc, prefix='')}") from exc
        get_service = self.get_service
        assert get_service is not None
        return await threads.CALLS.run(_run, get_service, op, args)


def _known(op: Operation, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments the operation has (others are ignored, as the SDK's tools always did), an
    object or list sent as a JSON string parsed (some clients send every argument as a string)."""
    known: dict[str, Any] = {}
    for key, value in arguments.items():
        field = op.input.model_fields.get(key)
        if field is None:
            continue
        if isinstance(value, str) and field.annotation is not str and value[:1] in ("{", "["):
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                parsed = value  # left for validation to refuse, naming the field
            value = parsed if isinstance(parsed, dict | list) else value
        known[key] = value
    return known


def _run(get_service: Callable[[], Service], op: Operation, args: Any) -> CallToolResult:
    try:
        result = call(get_service(), op, args)
    except ValidationError as exc:  # a model-level rule of the input, checked when the core shapes it
        raise ToolError(f"[invalid] {describe_validation_error(exc, prefix='')}") from exc
    except McpMemoryError as exc:
        raise ToolError(exc.render()) from exc
    except Exception as exc:  # noqa: BLE001 — a bug: logged with an incident id, never a bare traceback
        raise ToolError(internal(exc, log).render()) from exc
    # the text a model reads: compact, without the null fields (the structured copy has them all)
    return CallToolResult(content=[TextContent(type="text", text=result.model_dump_json(exclude_none=True))],
                          structured_content=result.model_dump(mode="json"))


def build_server(get_service: Callable[[], Service]) -> MemoryServer:
    server = MemoryServer("mcp-memory", version=__version__, instructions=INSTRUCTIONS)
    server.get_service = get_service
    resources.register(server, get_service)
    prompts.register(server, get_service)
    return server
