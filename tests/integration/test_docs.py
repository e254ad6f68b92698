"""Docs that can drift are checked: every CLI command, MCP tool and config setting is in the docs."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from mcp_memory.cli import _parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _commands() -> list[str]:
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


@pytest.mark.parametrize("command", _commands())
def test_every_command_is_in_the_readme(command: str) -> None:
    assert f"mcp-memory {command}" in README, f"README.md does not document `mcp-memory {command}`"


@pytest.mark.anyio
async def test_every_mcp_tool_is_in_the_readme(service) -> None:
    from mcp import Client

    from mcp_memory.mcp.server import build_server

    async with Client(build_server(lambda: service), mode="auto") as client:
        tools = [t.name for t in (await client.list_tools()).tools]
    missing = [t for t in tools if f"`{t}" not in README]
    assert not missing, f"README.md does not document the MCP tools {missing}"


def test_every_setting_is_in_the_example_config() -> None:
    source = "\n".join(p.read_text() for p in (ROOT / "mcp_memory").glob("config.py"))
    example = (ROOT / "config" / "mcp-memory.example.toml").read_text()
    keys = set(re.findall(r'_int\(\w+, "(\w+)"', source)) | set(re.findall(r'\w+\.get\("(\w+)"', source))
    keys -= {"MCP_MEMORY_DSN", "MCP_MEMORY_PASSWORD", "MCP_MEMORY_HOME", "MCP_MEMORY_CONFIG", "dsn"}
    missing = sorted(k for k in keys if k not in example)
    assert not missing, f"config/mcp-memory.example.toml does not document {missing}"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return dict(found.choices) if found else {}


def _command_lines() -> list[str]:
    """Each command written in the first cell of the README's command table (`mcp-memory db migrate`
    / `db status [--json]` / … gives three), without the leading `mcp-memory `."""
    lines = []
    for row in README.splitlines():
        if row.startswith("| `mcp-memory "):
            cell = row.split(" | ")[0]
            lines += [c.removeprefix("mcp-memory ") for c in re.findall(r"`([^`]+)`", cell)]
    return lines


@pytest.mark.parametrize("line", _command_lines())
def test_every_flag_in_the_command_table_is_the_commands(line: str) -> None:
    """The flags the README's command table names are those of the command's real parser (the
    one `--help` prints): a flag renamed or dropped in the code fails here."""
    parser, path = _parser(), []
    for word in line.split():
        if word not in _subparsers(parser):
            break
        parser = _subparsers(parser)[word]
        path.append(word)
    assert path, f"README.md names an unknown command: `mcp-memory {line}`"
    known = set(parser._option_string_actions) | set(_parser()._option_string_actions)
    flags = re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", line)
    unknown = [f for f in flags if f not in known]
    assert not unknown, f"`mcp-memory {' '.join(path)}` has no {unknown} (README.md: `{line}`)"
    assert all(f in parser.format_help() or f in _parser().format_help() for f in flags)


def test_the_command_table_covers_the_search_options() -> None:
    search = next(line for line in _command_lines() if line.startswith("search "))
    options = {k for k in _subparsers(_parser())["search"]._option_string_actions if k.startswith("--")}
    missing = sorted(options - {"--help"} - set(re.findall(r"--[a-z-]+", search)))
    assert not missing, f"README.md's `mcp-memory search` line lacks {missing}"
