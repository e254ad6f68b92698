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
    assert data == {"mcp_servers": {"mcp-memory": {"command": "mcp-memory", "args": ["serve"]}},
                    "hooks": {"on_session_end": [{"command": "mcp-memory sync hermes --hook", "timeout": 60}]}}
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


WITH_HOOKS = """\
hooks:
  on_session_end:
    - command: "~/.hermes/agent-hooks/log.sh"  # mine
  pre_tool_call:
    - matcher: terminal
      command: ~/.hermes/agent-hooks/block.sh
"""


def test_capture_hook_joins_the_users_hooks_and_leaves_them(tmp_path: Path) -> None:
    config = tmp_path / ".hermes" / "config.yaml"
    config.parent.mkdir()
    config.write_text(WITH_HOOKS)
    lines = _register(tmp_path)
    assert "added hooks.on_session_end capture hook" in lines[1] and "--accept-hooks" in lines[2]
    data = YAML(typ="safe").load(config.read_text())
    assert data["hooks"]["on_session_end"] == [
        {"command": "~/.hermes/agent-hooks/log.sh"},
        {"command": "env MCP_MEMORY_HOME=/data/mm mcp-memory sync hermes --hook", "timeout": 60},
    ]
    assert data["hooks"]["pre_tool_call"][0]["matcher"] == "terminal"
    assert "# mine" in config.read_text()
    assert "unchanged" in _register(tmp_path)[1]
    register(scope="user", command=["/opt/mm/bin/mcp-memory"], env={}, cwd=tmp_path,
             environ={"HOME": str(tmp_path)})  # a new launcher replaces our hook, never adds a second
    entries = YAML(typ="safe").load(config.read_text())["hooks"]["on_session_end"]
    assert [e["command"] for e in entries] == ["~/.hermes/agent-hooks/log.sh",
                                               "/opt/mm/bin/mcp-memory sync hermes --hook"]
    assert "removed our hooks.on_session_end" in _register(tmp_path, uninstall=True)[1]
    assert config.read_text() == WITH_HOOKS + "mcp_servers: {}\n"  # the server table install made stays


def test_hook_command_survives_hermes_splitting_it(tmp_path: Path) -> None:
    """Hermes splits the command with shlex and runs it without a shell: odd characters in the
    launcher path or a variable stay one word each."""
    import shlex

    from mcp_memory.agents.hermes.install import hook_command

    line = hook_command(["/opt/my tools/mcp-memory"], {"MCP_MEMORY_DSN": "postgresql://u@h/db?x=1;rm -rf ~"})
    assert shlex.split(line) == ["env", "MCP_MEMORY_DSN=postgresql://u@h/db?x=1;rm -rf ~",
                                 "/opt/my tools/mcp-memory", "sync", "hermes", "--hook"]


def test_hooks_that_are_not_a_mapping_are_refused(tmp_path: Path) -> None:
    config = tmp_path / ".hermes" / "config.yaml"
    config.parent.mkdir()
    config.write_text("hooks: [a, b]\n")
    with pytest.raises(ValueError, match="hooks is not a mapping"):
        _register(tmp_path)
    assert config.read_text() == "hooks: [a, b]\n"
