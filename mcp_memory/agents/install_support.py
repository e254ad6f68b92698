"""Registering mcp-memory in each agent's own config: one module per agent (`<agent>/install.py`),
each an `Installer`, all following one merge rule (`merge_server`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from ..config import Settings


class Installer(Protocol):
    """What `Agent.installer()` returns: an agent's install module."""

    def register(
        self, *, scope: str, command: list[str], env: dict[str, str], cwd: Path, environ: Mapping[str, str],
        uninstall: bool = False,
    ) -> list[str]:
        """Add (or with `uninstall`, remove only) what mcp-memory puts in the agent's config: its MCP
        server entry and, where the agent has them, capture hooks; returns what changed, one line each."""
        ...


def check_request(scope: str, command: list[str], *, scopes: Sequence[str] = ("user", "project")) -> None:
    """The checks every `register` starts with: a scope the agent has, a command to run."""
    if scope not in scopes:
        raise ValueError(f"unknown scope {scope!r}; choose {' or '.join(scopes)}")
    if not command:
        raise ValueError("command must name the mcp-memory executable")


SERVER_NAME = "mcp-memory"  # the server's entry in every agent's config

Change = Literal["added", "updated", "removed"]


def merge_server(
    document: MutableMapping[str, Any], key: str, entry: Mapping[str, Any] | None, *, where: Path,
    new_table: Callable[[], MutableMapping[str, Any]] = dict, plain: Callable[[Any], Any] = lambda v: v,
    wrap: Callable[[Mapping[str, Any]], Any] = dict, drop_empty: bool = True,
) -> Change | None:
    """The config-merge rule every installer follows, whatever the file's format: the server table
    `document[key]` gets `entry` under SERVER_NAME (None: the entry is removed, and with
    `drop_empty` the table too once empty). Other servers and keys are never touched. Returns what
    changed, None when the config already says it. `plain` turns the format's own value into plain
    data for the comparison, `wrap` turns `entry` into the format's own value, `new_table` makes the
    format's table when there is none yet."""
    servers = document.get(key)
    if servers is not None and not isinstance(servers, MutableMapping):
        raise ValueError(f"{where}: {key} is not a table of servers; fix it before registering")
    present = servers is not None and SERVER_NAME in servers
    if entry is None:
        if not present:
            return None
        assert servers is not None
        del servers[SERVER_NAME]
        if drop_empty and not servers:
            del document[key]
        return "removed"
    if present and plain(servers[SERVER_NAME]) == dict(entry):  # type: ignore[index]
        return None
    if servers is None:
        servers = document[key] = new_table()
    servers[SERVER_NAME] = wrap(entry)
    return "updated" if present else "added"


ROOT_OPT_IN = "MCP_MEMORY_EMBEDDED_AS_ROOT"


def root_opt_in(settings: Settings) -> dict[str, str]:
    """The variable a server or hook registered by root needs: the embedded server refuses root
    without the opt-in, and the agent launches its server later, without the installing shell's
    environment; running `install` as root with the embedded default is that opt-in."""
    if settings.dsn is not None or sys.platform == "win32" or os.geteuid() != 0:
        return {}
    return {ROOT_OPT_IN: "1"}


def without_handlers(group: Any, ours: Callable[[Any], bool]) -> Any:
    """A hook group (`{"matcher": …, "hooks": [handler, …]}`, the shape Claude Code and Gemini CLI
    share) without the handlers `ours` recognises; the group itself when none was ours, None when
    nothing else was in it."""
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return group
    others = [h for h in group["hooks"] if not ours(h)]
    if len(others) == len(group["hooks"]):
        return group
    return {**group, "hooks": others} if others else None
