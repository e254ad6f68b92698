"""MCP streamable HTTP at `/mcp`, behind the REST bearer tokens.

The tools, resources and prompt are the stdio server's (`build_server(get_service)`); `get_service`
answers with the service of the token of the HTTP request that carried the message. The SDK attaches
that request to each message's context, so a server middleware (`TokenService`) resolves the token
per message that reads the database — tools/call, resources/list, resources/read, prompts/get — never
per MCP session (a session id does not carry anyone's rights). Stateless mode with JSON responses: no
session state to keep, and any instance behind a load balancer can answer. A POST body is read
here under the REST body limit and screened by `jsoncheck` in a worker thread (size, UTF-8, shape)
before the SDK, which reads bodies without a limit and parses them on the event loop, sees it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import mcp_types as types
import pydantic_core
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .. import jsoncheck
from ..core.service import Service
from ..errors import Invalid, McpMemoryError
from ..mcp.server import build_server
from ..mcp.wire import INVALID_REQUEST, PARSE_ERROR, unusable_id
from ..security.tokens import Unauthorized
from .auth import bearer
from .body import Bodies, replay
from .errors import error_response

if TYPE_CHECKING:
    from .auth import TokenRegistry
    from .gate import Gate

LOOPBACK = ("127.0.0.1", "localhost", "::1")
SERVICE_METHODS = frozenset({"tools/call", "resources/list", "resources/read", "prompts/get"})
_current: ContextVar[Service] = ContextVar("mcp_memory_http_service")


def _current_service() -> Service:
    return _current.get()


class McpMount:
    """An ASGI endpoint: checks the bearer token, then hands the request to the SDK's transport."""

    def __init__(self, gate: Gate, *, host: str, bodies: Bodies) -> None:
        self.gate = gate
        self.bodies = bodies
        self.server = build_server(_current_service)
        security = None if host in LOOPBACK else TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self.server.streamable_http_app(streamable_http_path="/mcp", json_response=True, stateless_http=True,
                                        transport_security=security, host=host)
        self.asgi = StreamableHTTPASGIApp(self.server.session_manager)
        self.server.middleware.append(TokenService(gate.registry))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        raw = b""
        try:
            await self.gate.admit(request)
            if request.method == "POST":
                raw = await self.bodies.read(request)
        except McpMemoryError as exc:
            await error_response(exc)(scope, receive, send)
            return
        if request.method == "POST":
            try:  # JSON-RPC wants an error with id null for a body that is no usable request
                await run_in_threadpool(jsoncheck.loads, raw, limit=self.bodies.limit, what="request")
                problem, code = await run_in_threadpool(_unusable_id, raw), INVALID_REQUEST
            except Invalid as exc:
                problem, code = str(exc), PARSE_ERROR
            if problem:
                answer = types.JSONRPCError(jsonrpc="2.0", id=None,
                                            error=types.ErrorData(code=code, message=Invalid(problem).render()))
                await Response(answer.model_dump_json(by_alias=True), status_code=400,
                               media_type="application/json")(scope, receive, send)
                return
            receive = replay(raw, receive)  # the SDK reads the body once more, from here
        await self.asgi(scope, receive, send)


class TokenService:
    """Server middleware: while a message that reads the database is handled, `_current` holds the
    service of the bearer token of the HTTP request that carried it. The gate has checked that token
    before; one revoked since is a coded JSON-RPC error, never the handlers' missing service."""

    def __init__(self, registry: TokenRegistry) -> None:
        self.registry = registry

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method not in SERVICE_METHODS:
            return await call_next(ctx)
        try:
            if not isinstance(ctx.request, Request):
                raise Unauthorized(f"{ctx.method} over HTTP needs the request's bearer token")
            token = bearer(ctx.request.headers.get("authorization"))
            service = await run_in_threadpool(self.registry.service_for, token)
        except McpMemoryError as exc:
            raise MCPError(code=INVALID_REQUEST, message=exc.render(), data={"code": exc.code}) from exc
        reset = _current.set(service)
        try:
            return await call_next(ctx)
        finally:
            _current.reset(reset)


def _unusable_id(body: bytes) -> str | None:
    """Why a JSON-RPC body's id cannot be answered to (wire.unusable_id): the SDK would take such a
    request for a notification and answer nothing. A body that does not parse is the SDK's to refuse."""
    try:
        value = pydantic_core.from_json(body)
    except ValueError:
        return None
    return unusable_id(value)
