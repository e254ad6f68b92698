"""Registering mcp-memory in Gemini CLI's settings.json: user and project scope, merge, uninstall."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_memory.agents.gemini import install as gemini

ENTRY = {"command": "/bin/mcp-memory", "args": ["serve"], "env": {"MCP_MEMORY_DSN": "x"}}


def run(tmp_path: Path, scope: str = "user", **kwargs) -> list[str]:
    environ = {"HOME": str(tmp_path / "home")}
    return gemini.register(
        scope=scope,
        command=["/bin/mcp-memory"],
        env={"MCP_MEMORY_DSN": "x"},
        cwd=tmp_path / "proj",
        environ=environ,
        **kwargs,
    )


@pytest.mark.parametrize(
    "scope,where", [("user", "home/.gemini/settings.json"), ("project", "proj/.gemini/settings.json")]
)
def test_register_merges_and_uninstalls(tmp_path, scope, where):
    settings = tmp_path / where
    settings.parent.mkdir(parents=True)
    original = {"model": {"name": "gemini-2.5-pro"}, "mcpServers": {"other": {"command": "other"}}}
    settings.write_text(json.dumps(original))
    assert run(tmp_path, scope) == [f"{settings}: added MCP server mcp-memory (/bin/mcp-memory serve)"]
    data = json.loads(settings.read_text())
    assert (
        data["mcpServers"] == {"other": {"command": "other"}, "mcp-memory": ENTRY}
        and data["model"] == original["model"]
    )
    assert run(tmp_path, scope) == []
    assert run(tmp_path, scope, uninstall=True) == [f"{settings}: removed MCP server mcp-memory"]
    assert json.loads(settings.read_text()) == original


def test_new_file_and_gemini_cli_home(tmp_path):
    environ = {"HOME": str(tmp_path / "home"), "GEMINI_CLI_HOME": str(tmp_path / "g")}
    gemini.register(scope="user", command=["mcp-memory"], env={}, cwd=tmp_path, environ=environ)
    data = json.loads((tmp_path / "g" / ".gemini" / "settings.json").read_text())
    assert data == {"mcpServers": {"mcp-memory": {"command": "mcp-memory", "args": ["serve"], "env": {}}}}
    assert gemini.register(
        scope="user", command=["mcp-memory"], env={}, cwd=tmp_path, environ=environ, uninstall=True
    )
    assert json.loads((tmp_path / "g" / ".gemini" / "settings.json").read_text()) == {}


def test_settings_with_comments_are_refused(tmp_path):
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{ // mine\n "a": 1 }')
    with pytest.raises(ValueError, match="not plain JSON"):
        run(tmp_path)
    with pytest.raises(ValueError, match="unknown scope"):
        run(tmp_path, "system")
