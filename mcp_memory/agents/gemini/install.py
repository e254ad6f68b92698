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
from ..install_support import SERVER_NAME, check_request, merge_server


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
    entry: dict[str, Any] | None = None if uninstall else {
        "command": command[0], "args": [*command[1:], "serve"], "env": dict(env)}
    change = merge_server(data, "mcpServers", entry, where=path)
    if change is None:
        return []
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", new_mode=0o600)
    if entry is None:
        return [f"{path}: removed MCP server {SERVER_NAME}"]
    return [f"{path}: {change} MCP server {SERVER_NAME} ({shlex.join([entry['command'], *entry['args']])})"]


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
