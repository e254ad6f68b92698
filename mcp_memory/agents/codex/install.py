"""Register mcp-memory with Codex CLI: `[mcp_servers.mcp-memory]` in `$CODEX_HOME/config.toml`.

Where Codex reads it: README.md in this package, §Install (`[mcp_servers.<name>] command/args/env` in
`~/.codex/config.toml`; CODEX_HOME replaces `~/.codex`). No project-level file is known, so scope
"project" is refused. The file is edited with tomlkit so that comments and the order of other tables
survive; running twice changes nothing; uninstall removes only our table.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from ...files import atomic_write
from ..install_support import SERVER_NAME, check_request, merge_server


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
    """Add (or remove) the MCP server table; returns what changed, one line each."""
    if scope == "project":
        raise ValueError("Codex CLI reads MCP servers from $CODEX_HOME/config.toml only; use --scope user")
    check_request(scope, command, scopes=("user",))
    path = config_path(environ)
    document = _load(path)
    entry: dict[str, Any] | None = None if uninstall else {
        "command": command[0], "args": [*command[1:], "serve"], "env": dict(env)}
    change = merge_server(document, "mcp_servers", entry, where=path, wrap=_table,
                          new_table=lambda: tomlkit.table(is_super_table=True), plain=lambda v: v.unwrap())
    if change is None:
        return []
    text = tomlkit.dumps(document).rstrip("\n")
    atomic_write(path, text + "\n" if text else "", new_mode=0o600)
    if entry is None:
        return [f"{path}: removed MCP server {SERVER_NAME}"]
    return [f"{path}: {change} MCP server {SERVER_NAME} ({shlex.join([entry['command'], *entry['args']])})"]


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
