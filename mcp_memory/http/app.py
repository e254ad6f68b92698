"""The REST app (Starlette): auth, rate limit and body limit around the route table, JSON errors,
`/openapi.json`, `/healthz`, and MCP streamable HTTP at `/mcp` behind the same bearer tokens."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from ..errors import Invalid, McpMemoryError, Unavailable
from ..ui.app import create_ui
from .auth import TokenRegistry, bearer
from .errors import RateLimited, TooLarge, error_response, internal_error
from .mcp_mount import McpMount
from .openapi import document
from .ratelimit import RateLimiter
from .routes import ENDPOINTS, Call, Endpoint, parse_path, parse_query


@dataclass(frozen=True)
class HttpOptions:
    max_body_bytes: int = 32 * 1024 * 1024
    rate_limit: float = 20.0  # requests per second per token
    burst: int = 40
    recheck_seconds: float = 30.0
    host: str = "127.0.0.1"


class Gate:
    """What every authenticated request passes: token → role → rate limit → verified service."""

    def __init__(self, registry: TokenRegistry, limiter: RateLimiter) -> None:
        self.registry = registry
        self.limiter = limiter

    def admit(self, request: Request) -> str:
        token = bearer(request.headers.get("authorization"))
        role = self.registry.role_of(token)
        wait = self.limiter.take(role)
        if wait:
            raise RateLimited(f"too many requests for token {role}; retry in {wait} s", retry_after=wait)
        return token

    def run(self, token: str, endpoint: Endpoint, call: Call) -> Any:
        service = self.registry.service_for(token)
        try:
            return endpoint.run(service, call)
        except Unavailable:
            self.registry.service_for(token, force=True)  # Unauthorized if the token was revoked meanwhile
            raise


async def read_json(request: Request, limit: int) -> Any:
    """The JSON body (None when empty), refused with 413 past `limit` bytes, before parsing."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"body is larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"body is larger than {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Invalid(f"body is not valid JSON ({exc})") from None


def _result_json(result: Any) -> Any:
    return result.model_dump(mode="json") if hasattr(result, "model_dump") else result


def _handler(gate: Gate, endpoint: Endpoint, options: HttpOptions):
    async def handle(request: Request) -> Response:
        try:
            token = gate.admit(request)
            body = await read_json(request, options.max_body_bytes) if request.method != "GET" else None
            call = Call(path=parse_path(dict(request.path_params)),
                        query=parse_query(endpoint.query, dict(request.query_params)), body=body)
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
    gate = Gate(registry, RateLimiter(options.rate_limit, options.burst))
    mcp = McpMount(gate, host=options.host)
    routes = [Route("/openapi.json", _openapi, methods=["GET"]), Route("/healthz", _healthz, methods=["GET"]),
              Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]), Mount("/ui", create_ui(gate))]
    for endpoint in ENDPOINTS:
        routes.append(Route(endpoint.path, _handler(gate, endpoint, options), methods=list(endpoint.methods),
                            name=endpoint.name))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp.running():
            try:
                yield
            finally:
                registry.close()

    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error})
