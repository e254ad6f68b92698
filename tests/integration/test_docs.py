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
