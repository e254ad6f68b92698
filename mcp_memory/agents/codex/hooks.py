"""mcp-memory's hooks in Codex's `config.toml`: a Stop hook that captures each turn
(`mcp-memory sync codex --hook`) and a SessionStart hook that gives the new thread the project's
recall (`mcp-memory recall --hook --agent codex`).

Codex CLI 0.169 reads inline hooks as `[[hooks.<Event>]]` groups, each with `[[hooks.<Event>.hooks]]`
handlers `{type = "command", command, timeout}`, and runs a handler only once it is trusted:
`[hooks.state."<config path>:<event>:<group>:<handler>"] trusted_hash = "sha256:…"` (README.md §Hooks).
Editing keeps every group and handler that is not ours; ours go last, so the positions (and the
trust) of the user's own hooks never move.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, MutableMapping
from typing import Any

import tomlkit

from . import NAME

CAPTURE_EVENT = "Stop"  # after every turn: the rollout holds the whole turn by then
RECALL_EVENT = "SessionStart"
TIMEOUT = {CAPTURE_EVENT: 30, RECALL_EVENT: 20}  # seconds; Codex waits for a synchronous hook
STATE = "state"  # hooks.state: trust entries, not an event
PURPOSE = {
    CAPTURE_EVENT: "after every turn, stores what is new in the thread's rollout in mcp-memory",
    RECALL_EVENT: "gives every new or resumed thread the project's recall from mcp-memory",
}


def hook_commands(command: list[str], env: Mapping[str, str]) -> dict[str, str]:
    """Event → shell line. The hook runs with Codex's environment, so the profile variables of the
    server entry come first: a Codex started from any shell captures into the database its tools use."""
    assignments = [f"{key}={shlex.quote(value)}" for key, value in sorted(env.items())]
    return {
        CAPTURE_EVENT: " ".join([*assignments, shlex.join([*command, "sync", NAME, "--hook"])]),
        RECALL_EVENT: " ".join([*assignments, shlex.join([*command, "recall", "--hook", "--agent", NAME])]),
    }


def is_ours(handler: Any) -> bool:
    """A handler mcp-memory wrote (any profile, any executable path)."""
    command = handler.get("command") if isinstance(handler, Mapping) else None
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    ours = words[-3:] == ["sync", NAME, "--hook"] or words[-4:] == ["recall", "--hook", "--agent", NAME]
    return ours and any("mcp-memory" in word or "mcp_memory" in word for word in words)


def event_label(event: str) -> str:
    """`SessionStart` → `session_start`, as in Codex's trust keys."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def our_positions(hooks: Mapping[str, Any]) -> list[tuple[str, int, int]]:
    """(event, group index, handler index) of each of our handlers."""
    found = []
    for event in (CAPTURE_EVENT, RECALL_EVENT):
        groups = hooks.get(event)
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, Mapping) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if is_ours(handler):
                    found.append((event, g, h))
    return found


def drop_our_trust(hooks: Any) -> None:
    """Trust entries of the positions our handlers hold now (they are about to move or go)."""
    state = hooks.get(STATE)
    if not isinstance(state, MutableMapping):
        return
    suffixes = tuple(f"config.toml:{event_label(e)}:{g}:{h}" for e, g, h in our_positions(hooks))
    for key in [k for k in state if isinstance(k, str) and suffixes and k.endswith(suffixes)]:
        del state[key]
    if not state:
        del hooks[STATE]


def set_hooks(document: Any, commands: Mapping[str, str] | None, *, where: str) -> list[str]:
    """Ours replaced by `commands` (None: removed); returns what changed, one line each."""
    hooks = document.get("hooks")
    if hooks is None:
        if commands is None:
            return []
        hooks = document["hooks"] = tomlkit.table(is_super_table=True)
    if not isinstance(hooks, Mapping):
        raise ValueError(f"{where}: hooks is not a table; fix it before registering")
    before = {event: _plain(hooks.get(event)) for event in (CAPTURE_EVENT, RECALL_EVENT)}
    drop_our_trust(hooks)
    changes = []
    for event in (CAPTURE_EVENT, RECALL_EVENT):
        _remove_ours(hooks, event, where)
        if commands is not None:
            _append(hooks, event, commands[event])
        if _plain(hooks.get(event)) != before[event]:
            changes.append(f"removed {event} hook" if commands is None
                           else f"set {event} hook ({PURPOSE[event]}): {commands[event]}")
    if not hooks:
        del document["hooks"]
    return changes


def _remove_ours(hooks: Any, event: str, where: str) -> None:
    groups = hooks.get(event)
    if groups is None:
        return
    if not isinstance(groups, list):
        raise ValueError(f"{where}: hooks.{event} is not a list of hook groups; fix it before registering")
    for g in reversed(range(len(groups))):
        handlers = groups[g].get("hooks") if isinstance(groups[g], Mapping) else None
        if not isinstance(handlers, list):
            continue
        for h in reversed(range(len(handlers))):
            if is_ours(handlers[h]):
                del handlers[h]
        if not handlers:
            del groups[g]
    if not groups:
        del hooks[event]


def _append(hooks: Any, event: str, command: str) -> None:
    handler = tomlkit.table()
    handler.update({"type": "command", "command": command, "timeout": TIMEOUT[event]})
    handlers = tomlkit.aot()
    handlers.append(handler)
    group = tomlkit.table()
    group.append("hooks", handlers)
    if event not in hooks:
        hooks[event] = tomlkit.aot()
    hooks[event].append(group)


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def trust_entries(hooks: Mapping[str, Any]) -> dict[str, Any]:
    state = hooks.get(STATE)
    return dict(state) if isinstance(state, Mapping) else {}


def set_trust(document: Any, trusted: Mapping[str, str]) -> None:
    """`[hooks.state."<key>"] trusted_hash = …` for each of `trusted` (key → hash)."""
    hooks = document["hooks"]
    if STATE not in hooks:
        hooks[STATE] = tomlkit.table(is_super_table=True)
    for key, digest in trusted.items():
        entry = tomlkit.table()
        entry["trusted_hash"] = digest
        hooks[STATE][key] = entry
