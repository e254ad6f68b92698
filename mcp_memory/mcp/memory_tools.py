"""MCP tools for decisions, session context, search and recall (registered by build_server)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def register(server: Any, get_service: Callable[[], Any], *, errors: Callable) -> None:
    return None
