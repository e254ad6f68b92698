"""Register mcp-memory with Gemini CLI: `mcpServers` in settings.json.

Where Gemini reads it (README.md in this package, §Install; `mcpServers` in `settings.json`): scope "user"
→ `~/.gemini/settings.json` (Gemini CLI 0.61.0 resolves `~` from GEMINI_CLI_HOME when set, else HOME),
scope "project" → `<project>/.gemini/settings.json`. Entry shape `{"command", "args", "env"}`.
Merging keeps every other key; running twice changes nothing; uninstall removes only our entry.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ..install_support import check_request

SERVER_NAME = "mcp-memory"


def settings_path(scope: str, cwd: Path, environ: Mapping[str, str]) -> Path:
    if scope == "project":
        return Path(cwd) / ".gemini" / "settings.json"
    home = environ.get("GEMINI_CLI_HOME") or environ["HOME"]
    return Path(home) / ".gemini" / "settings.json"


def register(
    *,
    scope: str,
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    environ: Mapping[str, str],
    uninstall: bool = False,
) -> list[str]:
    """Add (or remove) the MCP server entry; returns what changed, one line each."""
    check_request(scope, command)
    path = settings_path(scope, cwd, environ)
    data = _load(path)
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise ValueError(f"{path}: mcpServers is not an object; fix it before registering")
    if uninstall:
        if not servers or SERVER_NAME not in servers:
            return []
        del servers[SERVER_NAME]
        if not servers:
            del data["mcpServers"]
        atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", new_mode=0o600)
        return [f"{path}: removed MCP server {SERVER_NAME}"]
    entry = {"command": command[0], "args": [*command[1:], "serve"], "env": dict(env)}
    servers = data.setdefault("mcpServers", {})
    if servers.get(SERVER_NAME) == entry:
        return []
    verb = "updated" if SERVER_NAME in servers else "added"
    servers[SERVER_NAME] = entry
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", new_mode=0o600)
    return [f"{path}: {verb} MCP server {SERVER_NAME} ({shlex.join([entry['command'], *entry['args']])})"]


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(
            f"{path} is not plain JSON ({exc}); comments are not kept, so edit it by hand or remove them"
        ) from None
    if not isinstance(data, dict):
        raise TypeError(f"{path} does not hold a JSON object")
    return data
