"""Register mcp-memory with GitHub Copilot CLI: the MCP server in `mcp-config.json` and the capture
and recall hooks in `settings.json`, both under COPILOT_HOME (default `~/.copilot`).

The server entry has the shape `copilot mcp add NAME --env K=V -- CMD ARGS` writes (1.0.102):
`{"type": "local", "command", "args", "env", "tools": ["*"]}`. Hooks (hooks.py): agentStop and
sessionEnd run `mcp-memory sync copilot --hook`, sessionStart `mcp-memory recall --hook --agent
copilot`. Only the user scope exists here: Copilot reads repository hooks from `.github/hooks/`,
which is the project's own to commit. Merging keeps every other key, server and hook; running twice
changes nothing; uninstall removes only ours.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ..install_support import SERVER_NAME, check_request, merge_server
from .hooks import copilot_home, merge_hooks, wanted_hooks


def register(
    *,
    scope: str,
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    environ: Mapping[str, str],
    uninstall: bool = False,
) -> list[str]:
    """Add (or remove) the MCP server entry and the hooks; returns what changed, one line each."""
    check_request(scope, command, scopes=("user",))
    home = copilot_home(environ)
    entry: dict[str, Any] | None = None if uninstall else {
        "type": "local", "command": command[0], "args": [*command[1:], "serve"], "env": dict(env), "tools": ["*"]}
    lines = []
    servers_path = home / "mcp-config.json"
    servers = _load(servers_path)
    change = merge_server(servers, "mcpServers", entry, where=servers_path, drop_empty=False)
    if change is not None:
        _save(servers_path, servers)
        what = "removed" if entry is None else f"{change}"
        detail = "" if entry is None else f" ({shlex.join([entry['command'], *entry['args']])})"
        lines.append(f"{servers_path}: {what} MCP server {SERVER_NAME}{detail}")
    settings_path = home / "settings.json"
    settings = _load(settings_path)
    hooks = merge_hooks(settings, wanted_hooks(command, env), uninstall, settings_path)
    if hooks:
        _save(settings_path, settings)
        lines += [f"{settings_path}: {line}" for line in hooks]
    return lines


def _save(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", new_mode=0o600)


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
