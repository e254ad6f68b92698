"""Register mcp-memory with Claude Code: the MCP server entry and the capture hooks.

Where Claude Code reads them (README.md in this package, §Install; documented up to ~2.1.23x):
- MCP servers: scope "user" → top-level `mcpServers` of `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`
  when that is set, as Claude Code 2.1.328 does); scope "project" →
  `<project>/.mcp.json`. Entry shape `{"type": "stdio", "command", "args", "env"}`.
- Hooks: `~/.claude/settings.json` (or `$CLAUDE_CONFIG_DIR/settings.json`) for "user",
  `<project>/.claude/settings.json` for "project"; `{"hooks": {Event: [{"matcher", "hooks": [{"type":
  "command", "command", "timeout"}]}]}}`.

Merging keeps everything that is not ours; running twice changes nothing; uninstall removes only ours.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ..install_support import SERVER_NAME, check_request, merge_server, without_handlers
from . import NAME

HOOK_EVENTS = ("Stop", "SubagentStop", "PreCompact", "SessionEnd")  # capture: `sync claude-code --hook`
RECALL_EVENT = "SessionStart"  # the project's memory as additional context: `recall --hook`
HOOK_TIMEOUT = {"SessionEnd": 30}  # SessionEnd hooks get 1.5 s unless a timeout is given
DEFAULT_TIMEOUT = 60


def register(
    *,
    scope: str,
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    environ: Mapping[str, str],
    uninstall: bool = False,
) -> list[str]:
    """Add (or remove) the MCP server and the capture hooks; returns what changed, one line each."""
    check_request(scope, command)
    server_file, settings_file = config_paths(scope, Path(cwd), environ)
    changes = []
    changes += _update(server_file, lambda data: _server(data, command, env, uninstall, server_file))
    hooks = {event: hook_command(command, env) for event in HOOK_EVENTS}
    hooks[RECALL_EVENT] = hook_command(command, env, "recall", "--hook", "--agent", NAME)
    changes += _update(settings_file, lambda data: _hooks(data, hooks, uninstall))
    return changes


def config_paths(scope: str, cwd: Path, environ: Mapping[str, str]) -> tuple[Path, Path]:
    """(file holding mcpServers, settings.json holding hooks) for a scope."""
    if scope == "project":
        return cwd / ".mcp.json", cwd / ".claude" / "settings.json"
    config = environ.get("CLAUDE_CONFIG_DIR")
    if config:  # checked with Claude Code 2.1.328: .claude.json then lives in the config dir too
        return Path(config) / ".claude.json", Path(config) / "settings.json"
    home = Path(environ["HOME"])
    return home / ".claude.json", home / ".claude" / "settings.json"


def hook_command(command: list[str], env: Mapping[str, str], *words: str) -> str:
    """The shell line of a hook: the same profile variables as the server entry (so a Claude
    started from any shell captures into the database its tools use), then the command."""
    words = words or ("sync", NAME, "--hook")
    assignments = [f"{key}={shlex.quote(value)}" for key, value in sorted(env.items())]
    return " ".join([*assignments, shlex.join([*command, *words])])


def _server(data: dict[str, Any], command: list[str], env: dict[str, str], uninstall: bool, where: Path) -> list[str]:
    entry: dict[str, Any] | None = None if uninstall else {
        "type": "stdio", "command": command[0], "args": list(command[1:]) + ["serve"], "env": dict(env)}
    change = merge_server(data, "mcpServers", entry, where=where)
    if change is None:
        return []
    if entry is None:
        return [f"removed MCP server {SERVER_NAME}"]
    return [f"{change} MCP server {SERVER_NAME} ({shlex.join([entry['command'], *entry['args']])})"]


def _hooks(data: dict[str, Any], commands: dict[str, str], uninstall: bool) -> list[str]:
    hooks = data.setdefault("hooks", {})
    changes = []
    for event, command in commands.items():
        groups = hooks.get(event, [])
        kept = [_without_ours(group) for group in groups]
        kept = [group for group in kept if group is not None]
        if not uninstall:
            timeout = HOOK_TIMEOUT.get(event, DEFAULT_TIMEOUT)
            kept.append(
                {"matcher": "", "hooks": [{"type": "command", "command": command, "timeout": timeout}]}
            )
        if kept == groups:
            continue
        if kept:
            hooks[event] = kept
        else:
            hooks.pop(event, None)
        changes.append(f"{'removed' if uninstall else 'set'} {event} hook: {command}")
    if not hooks:
        data.pop("hooks", None)
    return changes


def _without_ours(group: Any) -> Any:
    return without_handlers(group, _is_ours)


def _is_ours(handler: Any) -> bool:
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    try:
        words = shlex.split(handler["command"])
    except ValueError:
        return False
    ours = (words[-3:] == ["sync", NAME, "--hook"] or words[-2:] == ["recall", "--hook"]  # before --agent
            or words[-4:] == ["recall", "--hook", "--agent", NAME])
    return ours and any("mcp-memory" in w or "mcp_memory" in w for w in words)


def _update(path: Path, change: Any) -> list[str]:
    """Load a JSON object (absent = {}), apply change, write back atomically if anything changed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); fix it before registering") from None
    if not isinstance(data, dict):
        raise TypeError(f"{path} does not hold a JSON object")
    before = json.dumps(data, sort_keys=True)
    lines = change(data)
    if json.dumps(data, sort_keys=True) == before:
        return []
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", new_mode=0o600)
    return [f"{path}: {line}" for line in lines]
