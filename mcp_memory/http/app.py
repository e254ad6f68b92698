"""The REST app (Starlette): auth, rate limit and body limit around the route table, JSON errors,
`/openapi.json`, `/healthz`, and MCP streamable HTTP at `/mcp` behind the same bearer tokens."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from anyio import CapacityLimiter, to_thread
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import jsoncheck
from ..errors import Invalid, McpMemoryError
from ..ui.app import create_ui
from ..ui.owner import OwnerSignIn
from . import observe
from .auth import TokenRegistry
from .body import Bodies
from .errors import error_response, internal_error
from .gate import Gate
from .mcp_mount import McpMount
from .openapi import document
from .proxies import Network, TrustedProxies
from .ratelimit import RateLimiter
from .routes import ENDPOINTS, Call, Endpoint, parse_path, parse_query


@dataclass(frozen=True)
class HttpOptions:
    max_body_bytes: int = 32 * 1024 * 1024
    rate_limit: float = 20.0  # requests per second per token
    burst: int = 40
    recheck_seconds: float = 30.0
    auth_failures_per_second: float = 1.0  # per (client address, claimed role)
    auth_failure_burst: int = 20
    pool_max: int = 8  # connections shared by every token
    host: str = "127.0.0.1"
    trusted_proxies: tuple[Network, ...] = ()  # X-Forwarded-For is believed only from these
    max_waits: int = 256  # long-poll reads (wait_seconds) waiting at once, on threads of their own
    metrics: bool = True  # GET /metrics (Prometheus text format, no token: numbers only)
    machine: str | None = None  # this machine's name when the database is the embedded default (/ui hosts)
    header_seconds: float = 10.0  # a connection that sends no complete request line and headers in time is closed
    body_seconds: float = 60.0  # a request body not received in full within this time: 408
    max_connections: int = 10_000  # open connections at most (kept below the open-file limit; guard.py)
    big_bodies_at_once: int = 2  # bodies over 1 MiB read and decoded at once (the next ones wait; body.py)


MAX_ID_DIGITS = 18  # an integer path parameter fits PostgreSQL's bigint


def check_path(endpoint: Endpoint, raw: dict[str, str]) -> dict[str, str]:
    """Path parameters: integers are digits that fit a bigint, text is valid Unicode."""
    for name, value in raw.items():
        if _is_integer(endpoint, name) and not (value.isascii() and value.isdigit() and len(value) <= MAX_ID_DIGITS):
            raise Invalid(f"{name} must be a positive integer of at most {MAX_ID_DIGITS} digits")
        problem = jsoncheck.bad_text(value, [name], allow_nul=True)
        if problem:
            raise Invalid(problem)
    return parse_path(raw)


def _is_integer(endpoint: Endpoint, name: str) -> bool:
    """Whether the operation's input model types path parameter `name` as an integer."""
    field = endpoint.op.input.model_fields.get(name)
    return field is not None and field.annotation is int


def check_query(endpoint: Endpoint, raw: dict[str, str]) -> dict[str, Any]:
    for name, value in raw.items():
        problem = jsoncheck.bad_text(value, [f"query parameter {name}"], allow_nul=True)
        if problem:
            raise Invalid(problem)
    return parse_query(endpoint.query, raw)


def _result_json(result: Any) -> Any:
    return result.model_dump(mode="json") if hasattr(result, "model_dump") else result


class _WaitLimiter:
    """The long polls' thread limiter, made in the server's event loop on first use."""

    def __init__(self, size: int) -> None:
        self.size = max(size, 1)
        self._limiter: CapacityLimiter | None = None

    def get(self) -> CapacityLimiter:
        if self._limiter is None:
            self._limiter = CapacityLimiter(self.size)
        return self._limiter


def _handler(gate: Gate, endpoint: Endpoint, bodies: Bodies, waits: _WaitLimiter):
    async def handle(request: Request) -> Response:
        try:
            token, _ = await gate.admit(request)
            body = await bodies.json(request) if request.method != "GET" else None
            call = Call(path=check_path(endpoint, dict(request.path_params)),
                        query=check_query(endpoint, dict(request.query_params)), body=body)
            if call.query.get("wait_seconds"):
                # a long poll sleeps on a thread of its own pool (no connection held meanwhile), so
                # that waiting readers never take the threads every other request runs on
                result = await to_thread.run_sync(gate.run, token, endpoint, call, limiter=waits.get())
            else:
                result = await run_in_threadpool(gate.run, token, endpoint, call)
            return JSONResponse(_result_json(result), status_code=endpoint.status)
        except McpMemoryError as exc:
            return error_response(exc)
        except Exception as exc:  # noqa: BLE001 - a bug: 500 and a logged traceback, never a user error
            return internal_error(exc)

    return handle


class StrictFraming:
    """Refuses, before any route sees it, a request whose body length is ambiguous: Content-Length
    together with Transfer-Encoding, or Content-Length given twice. A proxy in front that reads the
    other header would see a different request boundary (request smuggling); RFC 9112 §6.1 lets a
    server reject such a message and requires it to close the connection afterwards."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            names = [name.lower() for name, _ in scope["headers"]]
            lengths = names.count(b"content-length")
            if lengths > 1 or (lengths and b"transfer-encoding" in names):
                problem = ("Content-Length is given more than once" if lengths > 1 else
                           "Content-Length and Transfer-Encoding are both given")
                response = error_response(Invalid(f"request framing: {problem}; send exactly one of them "
                                                  "(an ambiguous body length is refused)"))
                response.headers["Connection"] = "close"
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _openapi(request: Request) -> Response:
    return JSONResponse(document())


async def _healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def _http_error(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 500)
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "error")
    detail = getattr(exc, "detail", "") or "error"
    return JSONResponse({"error": {"code": code, "message": f"{request.method} {request.url.path}: {detail}"}},
                        status_code=status)


def create_app(registry: TokenRegistry, options: HttpOptions | None = None,
               owners: OwnerSignIn | None = None) -> Starlette:
    """`owners`: the review pages' one-person mode (`mcp-memory ui` on the embedded default, loopback)."""
    options = options or HttpOptions()
    gate = Gate(registry, RateLimiter(options.rate_limit, options.burst),
                RateLimiter(options.auth_failures_per_second, options.auth_failure_burst),
                proxies=TrustedProxies(options.trusted_proxies))
    bodies = Bodies(options.max_body_bytes, big_at_once=options.big_bodies_at_once, body_seconds=options.body_seconds)
    mcp = McpMount(gate, host=options.host, bodies=bodies)
    metrics = observe.registry_for(registry)
    routes = [Route("/openapi.json", _openapi, methods=["GET"]), Route("/healthz", _healthz, methods=["GET"]),
              Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]), Mount("/ui", create_ui(gate, owners, machine=options.machine))]
    if options.metrics:
        routes.append(Route("/metrics", observe.endpoint(metrics), methods=["GET"]))
    waits = _WaitLimiter(options.max_waits)
    for endpoint in ENDPOINTS:
        routes.append(Route(endpoint.path, _handler(gate, endpoint, bodies, waits), methods=list(endpoint.methods),
                            name=endpoint.name))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp.running():
            try:
                yield
            finally:
                registry.close()

    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error},
                     middleware=[Middleware(StrictFraming),
                                 Middleware(observe.Measured, metrics=metrics, routes=routes)])
