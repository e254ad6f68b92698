"""`mcp-memory install aider`: the recall file in Aider's `.aider.conf.yml` (`read:`), and how capture runs.

Aider 0.86 launches no MCP servers and has no hooks (README.md in this package), so there is no server
entry to write. What it has is `read:` in `.aider.conf.yml` (the `--read FILE` switch): files Aider adds
read-only to every request, resolved against the folder Aider starts in. We add `RECALL_FILE` there (in
`~/.aider.conf.yml` for scope user, `<project>/.aider.conf.yml` for scope project), and
`mcp-memory watch aider`, which captures the history files, keeps that file filled with the project's
recall. Edited with ruamel.yaml in round-trip mode: the user's comments and other keys stay.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedSeq

from ..hermes.install import _load, _save, _yaml
from ..install_support import check_request

RECALL_FILE = ".aider.mcp-memory.md"  # relative: Aider resolves it in the folder it starts in
CONFIG_FILE = ".aider.conf.yml"


def config_path(scope: str, cwd: Path, environ: Mapping[str, str]) -> Path:
    if scope == "project":
        return cwd / CONFIG_FILE
    if not environ.get("HOME"):
        raise ValueError("HOME is not set; cannot find ~/.aider.conf.yml (or use --scope project)")
    return Path(environ["HOME"]) / CONFIG_FILE


def register(
    *,
    scope: str,
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    environ: Mapping[str, str],
    uninstall: bool = False,
) -> list[str]:
    """Add (or with `uninstall`, remove) our entry in `read:`; returns what changed and how to capture."""
    check_request(scope, command)
    path = config_path(scope, cwd, environ)
    yaml = _yaml()
    document = _load(yaml, path)
    change = merge_read(document, add=not uninstall, where=path)
    if change is not None:
        _save(yaml, document, path)
    if uninstall:
        return [f"{path}: removed {RECALL_FILE} from read" if change else
                f"{path}: {RECALL_FILE} is not in read; nothing to remove"]
    watch = shlex.join([*(["env", *(f"{k}={v}" for k, v in sorted(env.items()))] if env else []), *command,
                        "watch", "aider"])
    return [f"{path}: {change} {RECALL_FILE} in read (Aider adds it to every request, read-only)" if change
            else f"{path}: {RECALL_FILE} already in read; unchanged",
            "Aider has no MCP and no hooks: capture and recall run by watching. In the project folder run "
            f"`{watch}` (or add --install-service to make it a systemd user service): it stores each run of "
            f"Aider from .aider.chat.history.md and keeps {RECALL_FILE} filled with the project's memory."]


def merge_read(document: Any, *, add: bool, where: Path) -> str | None:
    """`read` with our file in it (`add`) or without it; a single string becomes a list."""
    current = document.get("read")
    if current is not None and not isinstance(current, (str, list)):
        raise ValueError(f"{where}: read is neither a file name nor a list; fix it before registering")
    entries = [current] if isinstance(current, str) else list(current or [])
    present = RECALL_FILE in entries
    if present == add:
        return None
    if add:
        if isinstance(current, list):
            current.append(RECALL_FILE)
        else:
            document["read"] = CommentedSeq([*entries, RECALL_FILE])
        return "added"
    rest = [entry for entry in entries if entry != RECALL_FILE]
    if not rest:
        del document["read"]
    elif isinstance(current, list):
        current.remove(RECALL_FILE)
    else:
        document["read"] = rest[0]
    return "removed"
