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

from .. import jsoncheck
from ..core.service import Service
from ..errors import Invalid, McpMemoryError, Unavailable
from ..security.tokens import Unauthorized
from ..ui.app import create_ui
from . import observe
from .auth import TokenRegistry, bearer
from .body import read_json
from .errors import RateLimited, error_response, internal_error
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


ADDRESS_SHARE = 4  # an address may fail this many (address, role) budgets in all before it is slowed down


class Gate:
    """What every request on a protected route passes, in this order:

    1. the token is verified (a verification cached within `recheck_seconds` costs no database work);
    2. only then is its role rate-limited, so a forged token never spends a real token's requests.

    A failed verification is charged to (client address, claimed role) and to the address as a whole
    (ADDRESS_SHARE times that budget); once either is spent, tokens from there are refused before any
    database work — except a token the registry has verified before: a real token is always served,
    whatever is forged next to it. The client address is the peer's, or X-Forwarded-For's client when
    the peer is a trusted proxy (proxies.py). A string that is not a token at all costs no database
    work and is answered 401 without being charged."""

    def __init__(self, registry: TokenRegistry, limiter: RateLimiter, failures: RateLimiter, *,
                 address_failures: RateLimiter | None = None, proxies: TrustedProxies | None = None) -> None:
        self.registry = registry
        self.limiter = limiter
        self.failures = failures
        self.address_failures = address_failures or RateLimiter(failures.rate * ADDRESS_SHARE,
                                                                failures.burst * ADDRESS_SHARE)
        self.proxies = proxies or TrustedProxies()

    def client_of(self, request: Request) -> str:
        peer = request.client.host if request.client else "unknown"
        forwarded = ", ".join(request.headers.getlist("x-forwarded-for")) or None
        return self.proxies.client(peer, forwarded)

    def authenticate(self, header: str | None, client: str) -> tuple[str, Service]:
        """(token, service) of a verified bearer token; runs in a worker thread (it may query)."""
        token = bearer(header)
        return token, self.verify(token, client)

    def verify(self, token: str, client: str) -> Service:
        """The service of a verified token, after its role's rate limit (REST, /mcp and the /ui cookie)."""
        role = self.registry.role_of(token)
        failures_key = f"{client} {role}"
        if not self.registry.was_verified(token):
            wait = max(self.failures.blocked(failures_key), self.address_failures.blocked(client))
            if wait:
                raise RateLimited(f"too many failed authentications for token {role} from {client}; "
                                  f"retry in {wait} s", retry_after=wait)
        try:
            service = self.registry.service_for(token)
        except Unauthorized:
            self.failures.take(failures_key)
            self.address_failures.take(client)
            raise
        wait = self.limiter.take(role)
        if wait:
            raise RateLimited(f"too many requests for token {role}; retry in {wait} s", retry_after=wait)
        return service

    async def admit(self, request: Request) -> tuple[str, Service]:
        return await run_in_threadpool(self.authenticate, request.headers.get("authorization"),
                                       self.client_of(request))

    def run(self, token: str, endpoint: Endpoint, call: Call) -> Any:
        service = self.registry.service_for(token)
        try:
            return endpoint.run(service, call)
        except Unavailable:
            self.registry.service_for(token, force=True)  # Unauthorized if the token was revoked meanwhile
            raise


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


def _handler(gate: Gate, endpoint: Endpoint, options: HttpOptions, waits: _WaitLimiter):
    async def handle(request: Request) -> Response:
        try:
            token, _ = await gate.admit(request)
            body = await read_json(request, options.max_body_bytes) if request.method != "GET" else None
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


def create_app(registry: TokenRegistry, options: HttpOptions | None = None) -> Starlette:
    options = options or HttpOptions()
    gate = Gate(registry, RateLimiter(options.rate_limit, options.burst),
                RateLimiter(options.auth_failures_per_second, options.auth_failure_burst),
                proxies=TrustedProxies(options.trusted_proxies))
    mcp = McpMount(gate, host=options.host, max_body_bytes=options.max_body_bytes)
    metrics = observe.registry_for(registry)
    routes = [Route("/openapi.json", _openapi, methods=["GET"]), Route("/healthz", _healthz, methods=["GET"]),
              Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]), Mount("/ui", create_ui(gate))]
    if options.metrics:
        routes.append(Route("/metrics", observe.endpoint(metrics), methods=["GET"]))
    waits = _WaitLimiter(options.max_waits)
    for endpoint in ENDPOINTS:
        routes.append(Route(endpoint.path, _handler(gate, endpoint, options, waits), methods=list(endpoint.methods),
                            name=endpoint.name))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp.running():
            try:
                yield
            finally:
                registry.close()

    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error},
                     middleware=[Middleware(observe.Measured, metrics=metrics, routes=routes)])
