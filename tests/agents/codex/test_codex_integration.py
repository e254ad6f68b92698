"""Registering mcp-memory in Codex CLI's config.toml: merge, idempotence, uninstall, comments kept."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from mcp_memory.agents.codex import install as codex

EXISTING = '# my settings\nmodel = "o3"\n\n[mcp_servers.other]\ncommand = "other" # keep me\n'


def run(tmp_path: Path, **kwargs) -> list[str]:
    environ = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(tmp_path / "codex")}
    return codex.register(
        scope="user",
        command=["/bin/mcp-memory"],
        env={"MCP_MEMORY_DSN": "x"},
        cwd=tmp_path,
        environ=environ,
        **kwargs,
    )


def test_register_merges_and_is_idempotent(tmp_path):
    config = tmp_path / "codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(EXISTING)
    changes = run(tmp_path)
    assert changes == [f"{config}: added MCP server mcp-memory (/bin/mcp-memory serve)"]
    data = tomllib.loads(config.read_text())
    assert data["mcp_servers"]["mcp-memory"] == {
        "command": "/bin/mcp-memory",
        "args": ["serve"],
        "env": {"MCP_MEMORY_DSN": "x"},
    }
    assert data["mcp_servers"]["other"] == {"command": "other"} and data["model"] == "o3"
    assert "# keep me" in config.read_text() and config.read_text().startswith("# my settings")
    assert run(tmp_path) == []
    assert run(tmp_path, uninstall=True) == [f"{config}: removed MCP server mcp-memory"]
    assert config.read_text() == EXISTING
    assert run(tmp_path, uninstall=True) == []


def test_default_home_and_project_scope(tmp_path):
    environ = {"HOME": str(tmp_path)}
    codex.register(scope="user", command=["mcp-memory"], env={}, cwd=tmp_path, environ=environ)
    assert "mcp-memory" in tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())["mcp_servers"]
    with pytest.raises(ValueError, match=r"config\.toml only"):
        codex.register(scope="project", command=["mcp-memory"], env={}, cwd=tmp_path, environ=environ)


def test_broken_toml_is_refused(tmp_path):
    (tmp_path / "codex").mkdir()
    (tmp_path / "codex" / "config.toml").write_text("model = \n")
    with pytest.raises(ValueError, match="not valid TOML"):
        run(tmp_path)
