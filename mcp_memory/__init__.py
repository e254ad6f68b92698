"""mcp-memory: shared, durable session memory for AI agents."""

from __future__ import annotations

import sys
from typing import Any

# Secret redaction relies on possessive quantifiers: the `re` module of Python 3.11.0–3.11.4 matches
# them wrongly around lookaheads and backtracking (CPython gh-100061, gh-106052, fixed in 3.11.5),
# and would keep secrets in clear. Refuse to run there rather than store them.
if sys.version_info < (3, 11, 5):
    raise ImportError(f"mcp-memory needs Python 3.11.5 or newer (this is {sys.version.split()[0]}): the re module "
                      "of 3.11.0-3.11.4 mismatches possessive quantifiers, which secret redaction relies on")

__version__ = "0.1.0"
__all__ = ["Memory", "__version__"]


def __getattr__(name: str) -> Any:
    """`Memory` is imported on first use, so `import mcp_memory` stays light for `serve`."""
    if name == "Memory":
        from .library import Memory

        return Memory
    raise AttributeError(f"module 'mcp_memory' has no attribute {name!r}")
