"""Registering mcp-memory in Hermes' config.yaml: merged, comment-preserving, idempotent, reversible."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from mcp_memory.agents.hermes.install import config_path, register

EXISTING = """\
# my Hermes settings
model: deepseek/deepseek-v4-flash  # keep this comment
mcp_servers:
  filesystem:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-filesystem", "/home/user/projects"]
"""


def _register(home: Path, **kwargs: object) -> list[str]:
    return register(
        scope="user",
        command=["mcp-memory"],
        env={"MCP_MEMORY_HOME": "/data/mm"},
        cwd=home,
        environ={"HOME": str(home)},
        **kwargs,
    )


def test_adds_the_server_and_keeps_everything_else(tmp_path: Path) -> None:
    config = tmp_path / ".hermes" / "config.yaml"
    config.parent.mkdir()
    config.write_text(EXISTING)
    lines = _register(tmp_path)
    assert "added mcp_servers.mcp-memory" in lines[0]
    text = config.read_text()
    assert "# my Hermes settings" in text and "# keep this comment" in text
    data = YAML(typ="safe").load(text)
    assert data["mcp_servers"]["mcp-memory"] == {
        "command": "mcp-memory",
        "args": ["serve"],
        "env": {"MCP_MEMORY_HOME": "/data/mm"},
    }
    assert data["mcp_servers"]["filesystem"]["command"] == "npx"
    assert data["model"] == "deepseek/deepseek-v4-flash"


def test_is_idempotent_and_uninstall_removes_only_ours(tmp_path: Path) -> None:
    config = tmp_path / ".hermes" / "config.yaml"
    config.parent.mkdir()
    config.write_text(EXISTING)
    _register(tmp_path)
    after_first = config.read_text()
    assert "unchanged" in _register(tmp_path)[0]
    assert config.read_text() == after_first
    assert "removed" in _register(tmp_path, uninstall=True)[0]
    assert config.read_text() == EXISTING
    assert "nothing to remove" in _register(tmp_path, uninstall=True)[0]


def test_creates_the_file_under_hermes_home(tmp_path: Path) -> None:
    environ = {"HERMES_HOME": str(tmp_path / "profile"), "HOME": "/nonexistent"}
    assert config_path(environ) == tmp_path / "profile" / "config.yaml"
    register(scope="user", command=["mcp-memory"], env={}, cwd=tmp_path, environ=environ)
    data = YAML(typ="safe").load((tmp_path / "profile" / "config.yaml").read_text())
    assert data == {"mcp_servers": {"mcp-memory": {"command": "mcp-memory", "args": ["serve"]}}}
    assert (tmp_path / "profile" / "config.yaml").stat().st_mode & 0o077 == 0
    assert not list((tmp_path / "profile").glob(".config.*"))  # no temporary file left


def test_project_scope_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use --scope user"):
        register(scope="project", command=["x"], env={}, cwd=tmp_path, environ={"HOME": str(tmp_path)})


def test_broken_yaml_is_left_alone(tmp_path: Path) -> None:
    config = tmp_path / ".hermes" / "config.yaml"
    config.parent.mkdir()
    config.write_text("mcp_servers: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        _register(tmp_path)
    assert config.read_text() == "mcp_servers: [unclosed\n"
