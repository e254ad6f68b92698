"""Register mcp-memory in HermesAgent's `config.yaml`: the MCP server and the capture shell hook.

Hermes reads MCP servers from the `mcp_servers` mapping of `$HERMES_HOME/config.yaml` (default
`~/.hermes/config.yaml`), one entry per server with `command`, `args` and `env`
(hermes-agent website/docs/user-guide/features/mcp.md), and shell hooks from its `hooks:` mapping,
event → list of `{command, timeout}` (features/hooks.md, §Shell Hooks): the command is split with
shlex and run without a shell, with the hook JSON on stdin and the profile's HERMES_HOME set. Our hook
runs `mcp-memory sync hermes --hook` on `on_session_end` (end of every turn, after Hermes has
written the turn's rows). README.md in this package, §Install and §Capture.
The file is edited with ruamel.yaml's round-trip mode, so the user's comments, key order and other
settings stay as they were; only our server entry and our hook entry are added, replaced or removed.
"""

from __future__ import annotations

import io
import shlex
from collections.abc import Mapping, MutableMapping, MutableSequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML, YAMLError
from ruamel.yaml.comments import CommentedMap, CommentedSeq

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
    line = None if uninstall else hook_command(command, env)
    hook_change = merge_hook(document, line, where=path)
    if change is not None or hook_change is not None:
        _save(yaml, document, path)
    return [_server_line(path, change, entry), _hook_line(path, hook_change, line)] + (
        [] if uninstall else [CONSENT_NOTE])


def _server_line(path: Path, change: str | None, entry: dict[str, Any] | None) -> str:
    if entry is None:
        return (f"{path}: removed mcp_servers.{SERVER_NAME}" if change
                else f"{path}: no {SERVER_NAME} server registered; nothing to remove")
    if change is None:
        return f"{path}: mcp_servers.{SERVER_NAME} already registered; unchanged"
    return f"{path}: {change} mcp_servers.{SERVER_NAME} ({shlex.join([entry['command'], *entry['args']])})"


def _hook_line(path: Path, change: str | None, line: str | None) -> str:
    where = f"hooks.{HOOK_EVENT}"
    if line is None:
        return (f"{path}: removed our {where} capture hook" if change
                else f"{path}: no {where} capture hook of ours; nothing to remove")
    if change is None:
        return f"{path}: {where} capture hook already registered; unchanged"
    return f"{path}: {change} {where} capture hook ({line})"


CONSENT_NOTE = (
    "Hermes asks once to approve a new shell hook (interactive runs); for non-interactive runs start it "
    "with --accept-hooks or HERMES_ACCEPT_HOOKS=1. Without hooks, `mcp-memory watch hermes` captures by "
    "polling state.db instead (`mcp-memory watch hermes --install-service` makes it a systemd user service)."
)
HOOK_EVENT = "on_session_end"  # fires at the end of every turn, after the turn's rows are written
HOOK_TIMEOUT = 60  # seconds; Hermes' default, and what a capture run is bounded to (capture.MAX_ROWS)
HOOK_WORDS = ["sync", "hermes", "--hook"]


def hook_command(command: list[str], env: Mapping[str, str]) -> str:
    """The hook's command line. Hermes runs it without a shell (shlex.split), so the profile's
    variables are given through `env NAME=VALUE …` rather than shell assignments."""
    words = [*command, *HOOK_WORDS]
    if env:
        words = ["env", *(f"{key}={value}" for key, value in sorted(env.items())), *words]
    return shlex.join(words)


def _ours(entry: Any) -> bool:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("command"), str):
        return False
    try:
        return shlex.split(entry["command"])[-3:] == HOOK_WORDS
    except ValueError:  # an unbalanced quote in someone else's hook
        return False


def merge_hook(document: MutableMapping[str, Any], line: str | None, *, where: Path) -> str | None:
    """Our entry in `hooks.on_session_end` set to `line` (None: removed); other hooks are never touched.
    Returns what changed, None when the config already says it."""
    hooks = document.get("hooks")
    if hooks is not None and not isinstance(hooks, MutableMapping):
        raise ValueError(f"{where}: hooks is not a mapping; fix it before registering")
    entries = hooks.get(HOOK_EVENT) if hooks is not None else None
    if entries is not None and not isinstance(entries, MutableSequence):
        raise ValueError(f"{where}: hooks.{HOOK_EVENT} is not a list; fix it before registering")
    ours = [entry for entry in entries or [] if _ours(entry)]
    wanted = {"command": line, "timeout": HOOK_TIMEOUT}
    if line is not None and len(ours) == 1 and _plain(ours[0]) == wanted:
        return None
    if line is None and not ours:
        return None
    if hooks is None:
        hooks = document["hooks"] = CommentedMap()
    if entries is None:
        entries = hooks[HOOK_EVENT] = CommentedSeq()
    for entry in ours:  # edited in place: comments on the other entries stay
        entries.remove(entry)
    if line is not None:
        entries.append(CommentedMap(wanted))
    if not entries:
        del hooks[HOOK_EVENT]
        if not hooks:
            del document["hooks"]
    return "removed" if line is None else ("updated" if ours else "added")


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
    if not isinstance(document, CommentedMap):  # round-trip mode loads every mapping as a CommentedMap
        raise ValueError(f"{path} does not hold a YAML mapping; fix it by hand first")  # noqa: TRY004 - a user error
    return document


def _save(yaml: YAML, document: CommentedMap, path: Path) -> None:
    """Write through a temporary file in the same folder and rename it over the original."""
    buffer = io.StringIO()
    yaml.dump(document, buffer)
    atomic_write(path, buffer.getvalue(), new_mode=0o600)
