"""Register mcp-memory as an MCP server in HermesAgent's `config.yaml`.

Hermes reads MCP servers from the `mcp_servers` mapping of `$HERMES_HOME/config.yaml` (default
`~/.hermes/config.yaml`), one entry per server with `command`, `args` and `env`
(hermes-agent website/docs/user-guide/features/mcp.md; README.md in this package, §Install).
The file is edited with ruamel.yaml's round-trip mode, so the user's comments, key order and other
settings stay as they were; only the `mcp-memory` entry is added, replaced or removed.
"""

from __future__ import annotations

import io
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML, YAMLError
from ruamel.yaml.comments import CommentedMap

from ...files import atomic_write
from ..install_support import SERVER_NAME, merge_server


def config_path(environ: Mapping[str, str]) -> Path:
    """`$HERMES_HOME/config.yaml`, else `$HOME/.hermes/config.yaml`."""
    if environ.get("HERMES_HOME"):
        return Path(environ["HERMES_HOME"]) / "config.yaml"
    if not environ.get("HOME"):
        raise ValueError("neither HERMES_HOME nor HOME is set; cannot find Hermes' config.yaml")
    return Path(environ["HOME"]) / ".hermes" / "config.yaml"


def register(
    *,
    scope: str,
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    environ: Mapping[str, str],
    uninstall: bool = False,
) -> list[str]:
    """Add (or with `uninstall`, remove) the `mcp-memory` server; returns what changed.

    Hermes has one config per home (profile), no per-project file, so only scope "user" exists;
    `cwd` is accepted for the common installer signature and not used.
    """
    if scope != "user":
        raise ValueError(f"Hermes has no {scope}-scoped MCP config; use --scope user")
    path = config_path(environ)
    yaml = _yaml()
    document = _load(yaml, path)
    entry = None if uninstall else _entry(command, env)
    change = merge_server(document, "mcp_servers", entry, where=path, new_table=CommentedMap, plain=_plain,
                          drop_empty=False)
    if change is None:
        return [f"{path}: no {SERVER_NAME} server registered; nothing to remove" if entry is None
                else f"{path}: mcp_servers.{SERVER_NAME} already registered; unchanged"]
    _save(yaml, document, path)
    if entry is None:
        return [f"{path}: removed mcp_servers.{SERVER_NAME}"]
    return [f"{path}: {change} mcp_servers.{SERVER_NAME} ({shlex.join([entry['command'], *entry['args']])})"]


def _entry(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    if not command:
        raise ValueError("the MCP server command is empty")
    entry: dict[str, Any] = {"command": command[0], "args": [*command[1:], "serve"]}
    if env:
        entry["env"] = dict(env)
    return entry


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _load(yaml: YAML, path: Path) -> CommentedMap:
    if not path.exists():
        return CommentedMap()
    try:
        document = yaml.load(path.read_text(encoding="utf-8"))
    except YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML ({exc}); fix it before registering") from None
    if document is None:
        return CommentedMap()
    if not isinstance(document, dict):
        raise ValueError(f"{path} does not hold a YAML mapping; fix it by hand first")  # noqa: TRY004 - a user error
    return document


def _save(yaml: YAML, document: CommentedMap, path: Path) -> None:
    """Write through a temporary file in the same folder and rename it over the original."""
    buffer = io.StringIO()
    yaml.dump(document, buffer)
    atomic_write(path, buffer.getvalue(), new_mode=0o600)
