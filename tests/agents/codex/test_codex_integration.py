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
    assert changes[0] == f"{config}: added MCP server mcp-memory (/bin/mcp-memory serve)"
    assert changes[1] == (f"{config}: set Stop hook (after every turn, stores what is new in the thread's "
                          "rollout in mcp-memory): MCP_MEMORY_DSN=x /bin/mcp-memory sync codex --hook")
    assert changes[2].startswith(f"{config}: set SessionStart hook (gives every new or resumed thread")
    assert changes[2].endswith("MCP_MEMORY_DSN=x /bin/mcp-memory recall --hook --agent codex")
    assert changes[3:] == [NOT_TRUSTED.format(config=config)]  # no codex on this PATH
    data = tomllib.loads(config.read_text())
    assert data["mcp_servers"]["mcp-memory"] == {
        "command": "/bin/mcp-memory",
        "args": ["serve"],
        "env": {"MCP_MEMORY_DSN": "x"},
    }
    assert data["hooks"]["Stop"] == [{"hooks": [{
        "type": "command", "command": "MCP_MEMORY_DSN=x /bin/mcp-memory sync codex --hook", "timeout": 30}]}]
    assert data["mcp_servers"]["other"] == {"command": "other"} and data["model"] == "o3"
    assert "# keep me" in config.read_text() and config.read_text().startswith("# my settings")
    written = config.read_text()
    assert run(tmp_path) == [NOT_TRUSTED.format(config=config)]
    assert config.read_text() == written
    assert run(tmp_path, uninstall=True) == [f"{config}: removed MCP server mcp-memory",
                                             f"{config}: removed Stop hook", f"{config}: removed SessionStart hook"]
    assert config.read_text() == EXISTING
    assert run(tmp_path, uninstall=True) == []


NOT_TRUSTED = ("{config}: hooks not trusted yet (the codex command is not on PATH); Codex runs them only once "
               "trusted: start codex and accept them in /hooks, or run `mcp-memory install codex` again with "
               "codex on PATH")

USERS_OWN = """notify = ["notify-send", "codex"]

[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "command"
command = "my-linter --check"

[hooks.state."/x/config.toml:stop:0:0"]
trusted_hash = "sha256:mine"
"""


def test_users_own_notify_and_hooks_stay(tmp_path):
    """The user's notify program, Stop hook and its trust stay as they were; ours come after them,
    and uninstall removes ours and the trust entries of our positions only."""
    config = tmp_path / "codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(USERS_OWN)
    run(tmp_path)
    data = tomllib.loads(config.read_text())
    assert data["notify"] == ["notify-send", "codex"]
    stop = data["hooks"]["Stop"]
    assert stop[0] == {"hooks": [{"type": "command", "command": "my-linter --check"}]}
    assert stop[1]["hooks"][0]["command"].endswith("sync codex --hook")
    assert data["hooks"]["state"] == {"/x/config.toml:stop:0:0": {"trusted_hash": "sha256:mine"}}
    # a trust entry for our position (as `install` records it) goes with our hook
    config.write_text(config.read_text() + '\n[hooks.state."/x/config.toml:stop:1:0"]\ntrusted_hash = "sha256:ours"\n')
    run(tmp_path, uninstall=True)
    assert tomllib.loads(config.read_text()) == tomllib.loads(USERS_OWN)


def test_a_hooks_value_that_is_not_a_table_is_refused(tmp_path):
    (tmp_path / "codex").mkdir()
    (tmp_path / "codex" / "config.toml").write_text('hooks = "no"\n')
    with pytest.raises(ValueError, match="hooks is not a table"):
        run(tmp_path)
    (tmp_path / "codex" / "config.toml").write_text('[hooks]\nStop = "no"\n')
    with pytest.raises(ValueError, match=r"hooks\.Stop is not a list"):
        run(tmp_path)


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
