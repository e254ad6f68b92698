"""serve-http's `/metrics` (README, Monitoring): request counts and latencies by route, method and
status, the shared pool's connections, the long polls waiting on the one append listener, and the
export queue (mm_archive_metrics: numbers only, which the gateway login may ask)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..metrics import CONTENT_TYPE, Registry, Sample, archive_samples, cached, pool_samples
from .auth import TokenRegistry

REQUESTS = "mcp_memory_http_requests_total"
LATENCY = "mcp_memory_http_request_seconds"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def registry_for(tokens: TokenRegistry) -> Registry:
    metrics = Registry()
    shared = tokens.shared
    metrics.collect(cached(lambda: archive_samples(shared.db)))
    metrics.collect(lambda: pool_samples(shared.db, "http"))
    metrics.collect(lambda: _wait_samples(tokens))
    return metrics


def _wait_samples(tokens: TokenRegistry) -> Iterable[Sample]:
    listener = tokens.shared.appends.listener
    yield Sample("mcp_memory_http_waiting_reads", "gauge", "long-poll reads (wait_seconds) waiting now",
                 float(listener.waiting_count()))
    yield Sample("mcp_memory_append_listener_connections", "gauge", "connections held for LISTEN (one per "
                 "server process while anybody waits)", float(listener.connected()))


def endpoint(metrics: Registry) -> Callable[[Request], Awaitable[Response]]:
    async def scrape(request: Request) -> Response:
        return Response(await run_in_threadpool(metrics.render), media_type=CONTENT_TYPE)

    return scrape


class Measured:
    """ASGI middleware: each HTTP request counted and timed under its route's template (never the
    raw path: ids would make a series per session)."""

    def __init__(self, app: ASGIApp, metrics: Registry, routes: list[BaseRoute]) -> None:
        self.app, self.metrics, self.routes = app, metrics, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            method = str(scope.get("method", ""))
            # a client chooses the method: an unknown one is "other", so no client can add series
            labels = (("method", method if method in METHODS else "other"), ("route", self._route(scope)))
            self.metrics.counter(REQUESTS, "HTTP requests by method, route and status",
                                 (*labels, ("status", str(status))))
            self.metrics.observe(LATENCY, "HTTP request latency in seconds by method and route",
                                 time.perf_counter() - started, labels)

    def _route(self, scope: Scope) -> str:
        partial = None
        for route in self.routes:
            match, _ = route.matches(scope)
            if match == Match.FULL:
                return str(getattr(route, "path", "other")) or "other"
            if match == Match.PARTIAL and partial is None:  # the path, another method (405)
                partial = str(getattr(route, "path", "other")) or "other"
        return partial or "other"
