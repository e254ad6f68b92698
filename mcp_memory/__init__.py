"""mcp-memory: shared, durable session memory for AI agents."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Memory", "__version__"]


def __getattr__(name: str) -> Any:
    """`Memory` is imported on first use, so `import mcp_memory` stays light for `serve`."""
    if name == "Memory":
        from .library import Memory

        return Memory
    raise AttributeError(f"module 'mcp_memory' has no attribute {name!r}")
