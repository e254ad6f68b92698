"""Registering mcp-memory in each agent's own config: one module per agent, each with
`register(*, scope, command, env, cwd, environ, uninstall) -> list[str]`."""

from __future__ import annotations

from collections.abc import Sequence


def check_request(scope: str, command: list[str], *, scopes: Sequence[str] = ("user", "project")) -> None:
    """The checks every `register` starts with: a scope the agent has, a command to run."""
    if scope not in scopes:
        raise ValueError(f"unknown scope {scope!r}; choose {' or '.join(scopes)}")
    if not command:
        raise ValueError("command must name the mcp-memory executable")
