"""`mcp-memory serve`: the MCP server over stdio, as agents launch it.

stdout carries only JSON-RPC: logging goes to stderr and is configured before the SDK is imported.
The database is resolved and the pool opened in a background thread, so `initialize` is answered at
once; if the database is down, tools answer `[unavailable]` and work again once it is back.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import anyio

from ..config import Settings
from ..errors import McpMemoryError

if TYPE_CHECKING:
    from ..core.service import Service
    from .server import MemoryServer

log = logging.getLogger(__name__)

WARM_UP_DELAY = 0.3  # seconds: after the SDK's own start, before a model's first tool call


def serve(settings: Settings) -> None:
    from .server import build_server

    service = LazyService(settings)

    def warm_up() -> None:
        try:
            service().db.pool()
        except McpMemoryError as exc:
            log.warning("database not ready yet: %s", exc)

    # Build the service (psycopg, the core) and connect (starting the embedded server) in the
    # background, a moment after start, so the handshake and tools/list are not competing with it;
    # a tool call before then builds and connects itself.
    timer = threading.Timer(WARM_UP_DELAY, warm_up)
    timer.name, timer.daemon = "mcp-memory-warm-up", True
    timer.start()
    server = build_server(service)
    server.screened = True  # mcp/wire.py checks each request's text before the SDK parses it
    try:
        anyio.run(_run, server, settings.max_request_bytes)
    finally:
        timer.cancel()
        service.close()


async def _run(server: MemoryServer, limit: int) -> None:
    """The SDK's stdio loop on the screened wire (mcp/wire.py): every request gets an answer."""
    from .wire import stdio

    lowlevel = server._lowlevel_server
    async with stdio(limit) as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


class LazyService:
    """The core service, built on first use (thread-safe)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._service: Service | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Service:
        with self._lock:
            if self._service is None:
                from ..wiring import build

                self._service = build(self.settings, application_name="mcp-memory serve")
            return self._service

    def close(self) -> None:
        with self._lock:
            service, self._service = self._service, None
        if service is not None:
            service.db.close()
