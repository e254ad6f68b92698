"""Register mcp-memory with Qwen Code: `mcpServers` and the capture/recall `hooks` in settings.json.

Where Qwen Code 0.24.4 reads them (README.md in this package, §Install): scope "user" →
`$QWEN_HOME/settings.json`, else `~/.qwen/settings.json`; scope "project" → `<project>/.qwen/settings.json`.
Server entry `{"command", "args", "env"}`, as `qwen mcp add` writes it. Hooks in Claude Code's shape
`{Event: [{"matcher", "hooks": [{"type": "command", "command", "timeout" (seconds)}]}]}`: Stop and
SessionEnd run `mcp-memory sync qwen-code --hook`, SessionStart runs `mcp-memory recall --hook --agent
qwen-code`. Merging keeps every other key, server and hook; running twice changes nothing; uninstall
removes only ours.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ..base import FormatError
from ..gemini.hooks import hook_command
from ..gemini.install import _load
from ..install_support import SERVER_NAME, check_request, merge_server, without_handlers
from . import NAME

CAPTURE_EVENTS = ("Stop", "SessionEnd")  # a turn has ended / the session closes (not fired by `qwen -p`)
RECALL_EVENT = "SessionStart"  # its additionalContext reaches the system prompt of the session
TIMEOUT_SECONDS = 30


def settings_path(scope: str, cwd: Path, environ: Mapping[str, str]) -> Path:
    if scope == "project":
        return Path(cwd) / ".qwen" / "settings.json"
    home = environ.get("QWEN_HOME")
    return Path(home) / "settings.json" if home else Path(environ["HOME"]) / ".qwen" / "settings.json"


def transcript_from_hook(payload: Mapping[str, Any]) -> Path:
    """The chat file of the payload's `transcript_path`: a `.jsonl` file in a `chats` folder."""
    event = payload.get("hook_event_name") or "an unknown event"
    value = payload.get("transcript_path")
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise FormatError(f"hook payload of {event}: transcript_path must name the chat file (got {value!r:.80})")
    path = Path(value).expanduser()
    if path.suffix != ".jsonl" or path.parent.name != "chats":
        raise FormatError(f"hook payload of {event}: transcript_path must be a Qwen Code chat file "
                          f"(…/chats/<session>.jsonl), got {value[:200]!r}")
    return path


def register(
    *, scope: str, command: list[str], env: dict[str, str], cwd: Path, environ: Mapping[str, str],
    uninstall: bool = False,
) -> list[str]:
    """Add (or remove) the MCP server entry and our hooks; returns what changed, one line each."""
    check_request(scope, command)
    path = settings_path(scope, cwd, environ)
    data = _load(path)
    before = json.dumps(data, sort_keys=True)
    entry: dict[str, Any] | None = None if uninstall else {
        "command": command[0], "args": [*command[1:], "serve"], "env": dict(env)}
    change = merge_server(data, "mcpServers", entry, where=path)
    wanted = {event: hook_command(command, env, "sync", NAME, "--hook") for event in CAPTURE_EVENTS}
    wanted[RECALL_EVENT] = hook_command(command, env, "recall", "--hook", "--agent", NAME)
    hooks = merge_hooks(data, wanted, uninstall, path)
    if json.dumps(data, sort_keys=True) == before:
        return []
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", new_mode=0o600)
    lines = [f"{path}: {line}" for line in hooks]
    if change == "removed":
        lines.insert(0, f"{path}: removed MCP server {SERVER_NAME}")
    elif change is not None and entry is not None:
        lines.insert(0, f"{path}: {change} MCP server {SERVER_NAME} ({shlex.join([entry['command'], *entry['args']])})")
    return lines


def merge_hooks(data: dict[str, Any], wanted: dict[str, str], uninstall: bool, where: Path) -> list[str]:
    """Our handlers into `data["hooks"]` (or out of it); every other group and handler is kept."""
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"{where}: hooks is not an object of events; fix it before registering")
    changes = []
    for event, command in wanted.items():
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise ValueError(f"{where}: hooks.{event} is not a list of hook groups; fix it before registering")
        kept = [g for g in (without_handlers(group, is_ours) for group in groups) if g is not None]
        if not uninstall:
            kept.append({"matcher": "", "hooks": [{"type": "command", "command": command, "timeout": TIMEOUT_SECONDS}]})
        if kept == groups:
            continue
        if kept:
            hooks[event] = kept
        else:
            hooks.pop(event, None)
        changes.append(f"removed {event} hook" if uninstall else f"set {event} hook: {command}")
    if hooks:
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)
    return changes


def is_ours(handler: Any) -> bool:
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    try:
        words = shlex.split(handler["command"])
    except ValueError:
        return False
    ours = words[-3:] == ["sync", NAME, "--hook"] or words[-4:] == ["recall", "--hook", "--agent", NAME]
    return ours and any("mcp-memory" in w or "mcp_memory" in w for w in words)
