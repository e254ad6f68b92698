"""Register mcp-memory with Gemini CLI: `mcpServers` and the capture/recall `hooks` in settings.json.

Where Gemini reads them (README.md in this package, §Install): scope "user" → `~/.gemini/settings.json`
(Gemini CLI 0.61.0 resolves `~` from GEMINI_CLI_HOME when set, else HOME), scope "project" →
`<project>/.gemini/settings.json`. Server entry `{"command", "args", "env"}`; hooks (hooks.py):
AfterAgent and SessionEnd run `mcp-memory sync gemini --hook`, BeforeAgent runs
`mcp-memory recall --hook --agent gemini` (which adds the recall to a session's first prompt only). Merging keeps every other key, server and hook; running
twice changes nothing; uninstall removes only ours.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ..install_support import SERVER_NAME, check_request, merge_server
from .hooks import disabled_notes, merge_hooks, wanted_hooks


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
    before = json.dumps(data, sort_keys=True)
    entry: dict[str, Any] | None = None if uninstall else {
        "command": command[0], "args": [*command[1:], "serve"], "env": dict(env)}
    change = merge_server(data, "mcpServers", entry, where=path)
    hooks = merge_hooks(data, wanted_hooks(command, env), uninstall, path)
    notes = [] if uninstall else disabled_notes(data, path)
    if json.dumps(data, sort_keys=True) == before:
        return notes
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", new_mode=0o600)
    lines = [f"{path}: {line}" for line in hooks]
    if change is not None and entry is None:
        lines.insert(0, f"{path}: removed MCP server {SERVER_NAME}")
    elif change is not None and entry is not None:
        lines.insert(0, f"{path}: {change} MCP server {SERVER_NAME} ({shlex.join([entry['command'], *entry['args']])})")
    return lines + notes


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
