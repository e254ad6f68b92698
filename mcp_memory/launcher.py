"""How to start this installation of mcp-memory from an agent's config (absolute paths)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def command() -> list[str]:
    """argv prefix that runs mcp-memory: the console script beside this interpreter, else -m."""
    scripts = Path(sys.executable).parent
    for name in ("mcp-memory", "mcp-memory.exe"):
        if (scripts / name).exists():
            return [str(scripts / name)]
    found = shutil.which("mcp-memory")
    return [found] if found else [sys.executable, "-m", "mcp_memory"]


def shell_command() -> str:
    import shlex

    return " ".join(shlex.quote(part) for part in command())
