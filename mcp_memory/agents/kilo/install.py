"""Register mcp-memory with Kilo Code CLI 7.x: the `mcp` entry in `kilo.json` and the capture plugin.

Kilo Code is an OpenCode fork and keeps OpenCode's config and plugin shapes (README.md in this package,
§Install): config `kilo.jsonc` or `kilo.json`, user scope in `$XDG_CONFIG_HOME/kilo/` (default
`~/.config/kilo/`), project scope in the project root; MCP entry `"mcp": {"<name>": {"type": "local",
"command": [argv…], "environment": {…}, "enabled": true}}`; plugins: ES modules in `<config>/plugins/`
(user) or `<project>/.kilo/plugins/` (project). The edits are OpenCode's (opencode/install.py): comments
kept, atomic, idempotent, uninstall removes only ours. The plugin is OpenCode's, naming `kilo`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..install_support import check_request
from ..opencode.install import PLUGIN_NAME, add_plugin, add_server, get_member, remove_plugin, remove_server
from . import NAME

SCHEMA = "https://app.kilo.ai/config.json"


def register(
    *, scope: str, command: list[str], env: dict[str, str], cwd: Path, environ: Mapping[str, str],
    uninstall: bool = False,
) -> list[str]:
    """Add (or remove) the MCP server entry and the capture plugin; returns what changed."""
    check_request(scope, command)
    config_dir = config_home(environ) if scope == "user" else cwd
    plugin_dir = config_home(environ) / "plugins" if scope == "user" else cwd / ".kilo" / "plugins"
    config = config_file(config_dir)
    if uninstall:
        return [*remove_server(config), *remove_plugin(plugin_dir / PLUGIN_NAME)]
    entry = {"type": "local", "command": [*command, "serve"], "environment": dict(env), "enabled": True}
    return [*add_server(config, entry, schema=SCHEMA), *add_plugin(plugin_dir / PLUGIN_NAME, command, env, NAME)]


def config_home(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_CONFIG_HOME")
    if base:
        return Path(base) / "kilo"
    home = environ.get("HOME")
    if not home:
        raise ValueError("neither XDG_CONFIG_HOME nor HOME is set")
    return Path(home) / ".config" / "kilo"


def config_file(folder: Path) -> Path:
    """The existing `kilo.jsonc` or `kilo.json` (jsonc first), else a new `kilo.json`."""
    for name in ("kilo.jsonc", "kilo.json"):
        if (folder / name).is_file():
            return folder / name
    return folder / "kilo.json"


def configured_model(cwd: Path, environ: Mapping[str, str]) -> str | None:
    """The `provider/model` Kilo runs when none is given: the project's config wins over the user's."""
    for folder in (cwd, config_home(environ)):
        path = config_file(folder)
        if path.is_file():
            model = get_member(path.read_text(encoding="utf-8"), ["model"])
            if isinstance(model, str) and "/" in model:
                return model
    return None
