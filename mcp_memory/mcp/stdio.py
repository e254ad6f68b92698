"""`mcp-memory serve`: the MCP server over stdio, as agents launch it.

stdout carries only JSON-RPC: logging goes to stderr and is configured before the SDK is imported.
The database is resolved and the pool opened in a background thread, so `initialize` is answered at
once; if the database is down, tools answer `[unavailable]` and work again once it is back.
"""

from __future__ import annotations

import logging
import threading

from ..config import Settings
from ..errors import McpMemoryError

log = logging.getLogger(__name__)

WARM_UP_DELAY = 1.5  # seconds


def serve(settings: Settings) -> None:
    from ..app import build
    from .server import build_server

    service = build(settings, application_name="mcp-memory serve")

    def warm_up() -> None:
        try:
            service.db.pool()
        except McpMemoryError as exc:
            log.warning("database not ready yet: %s", exc)

    # Connect (and start the embedded server) in the background, a moment after start, so the
    # handshake and tools/list are not competing with it; a tool call before then connects itself.
    timer = threading.Timer(WARM_UP_DELAY, warm_up)
    timer.name, timer.daemon = "mcp-memory-warm-up", True
    timer.start()
    server = build_server(lambda: service)
    try:
        server.run("stdio")
    finally:
        service.db.close()
