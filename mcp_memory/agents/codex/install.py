"""Register mcp-memory with Codex CLI in `$CODEX_HOME/config.toml`: the `[mcp_servers.mcp-memory]`
table, a Stop hook that captures every turn and a SessionStart hook that gives a new thread the
project's recall (hooks.py), trusted for Codex through its app server (trust.py).

Where Codex reads them: README.md in this package, §Install and §Hooks (`~/.codex/config.toml`;
CODEX_HOME replaces `~/.codex`). Only the user scope is offered: Codex runs a project's own hooks
only in a trusted project. The file is edited with tomlkit so that comments and the order of other
tables survive; running twice changes nothing; uninstall removes only what is ours. A user's own
`notify` program and hooks are left as they are (Codex runs all matching hooks).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from ...files import atomic_write
from ..install_support import SERVER_NAME, check_request, merge_server
from .hooks import event_label, hook_commands, our_positions, set_hooks, set_trust, trust_entries
from .trust import TrustUnavailable, current_hashes


def config_path(environ: Mapping[str, str]) -> Path:
    home = environ.get("CODEX_HOME")
    return Path(home) / "config.toml" if home else Path(environ["HOME"]) / ".codex" / "config.toml"


def register(
    *,
    scope: str,
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    environ: Mapping[str, str],
    uninstall: bool = False,
) -> list[str]:
    """Add (or remove) the MCP server table and our hooks; returns what changed, one line each."""
    if scope == "project":
        raise ValueError("Codex CLI reads MCP servers from $CODEX_HOME/config.toml only; use --scope user")
    check_request(scope, command, scopes=("user",))
    path = config_path(environ)
    document = _load(path)
    entry: dict[str, Any] | None = None if uninstall else {
        "command": command[0], "args": [*command[1:], "serve"], "env": dict(env)}
    change = merge_server(document, "mcp_servers", entry, where=path, wrap=_table,
                          new_table=lambda: tomlkit.table(is_super_table=True), plain=lambda v: v.unwrap())
    commands = None if uninstall else hook_commands(command, env)
    hook_changes = set_hooks(document, commands, where=str(path))
    changes = [] if change is None else [
        f"{path}: removed MCP server {SERVER_NAME}" if entry is None else
        f"{path}: {change} MCP server {SERVER_NAME} ({shlex.join([entry['command'], *entry['args']])})"]
    changes += [f"{path}: {line}" for line in hook_changes]
    if changes:
        _save(path, document)
    if commands is not None:
        changes += _trust(path, commands, environ=environ)
    return changes


def _trust(path: Path, commands: Mapping[str, str], *, environ: Mapping[str, str]) -> list[str]:
    """Record Codex's trust for our hooks (trust.py); say how to grant it by hand when Codex cannot
    be asked. Entries that are already right are not reported."""
    how = ("Codex runs them only once trusted: start codex and accept them in /hooks, "
           "or run `mcp-memory install codex` again with codex on PATH")
    scratch = tomlkit.document()
    set_hooks(scratch, commands, where="hooks")
    try:
        hashes = current_hashes(tomlkit.dumps(scratch), environ)
    except TrustUnavailable as exc:
        return [f"{path}: hooks not trusted yet ({exc}); {how}"]
    document = _load(path)
    hooks = document["hooks"]
    state = trust_entries(hooks)
    wanted = {}
    for event, group, handler in our_positions(hooks):
        digest = hashes.get(hooks[event][group]["hooks"][handler]["command"])
        if digest is None:
            return [f"{path}: Codex did not list our {event} hook; {how}"]
        key = f"{os.path.abspath(path)}:{event_label(event)}:{group}:{handler}"
        entry = state.get(key)
        if not isinstance(entry, dict) or entry.get("trusted_hash") != digest:
            wanted[key] = digest
    if not wanted:
        return []
    set_trust(document, wanted)
    _save(path, document)
    return [f"{path}: trusted our hooks for Codex ({', '.join(sorted(wanted))})"]


def _save(path: Path, document: tomlkit.TOMLDocument) -> None:
    text = tomlkit.dumps(document).rstrip("\n")
    atomic_write(path, text + "\n" if text else "", new_mode=0o600)


def _table(entry: Mapping[str, Any]) -> Any:
    table = tomlkit.table()
    table.update(entry)
    return table


def _load(path: Path) -> tomlkit.TOMLDocument:
    if not path.exists():
        return tomlkit.document()
    try:
        return tomlkit.parse(path.read_text(encoding="utf-8"))
    except TOMLKitError as exc:
        raise ValueError(f"{path} is not valid TOML ({exc}); fix it before registering") from None
