"""Registering mcp-memory with Claude Code: MCP server entry and capture hooks, merged idempotently."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from mcp_memory.agents.claude_code.install import HOOK_EVENTS, RECALL_EVENT, register

COMMAND = ["/opt/venv/bin/mcp-memory"]
HOOK = "/opt/venv/bin/mcp-memory sync claude-code --hook"


def test_user_scope_merges_and_is_idempotent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude.json").write_text(
        json.dumps({"numStartups": 3, "mcpServers": {"other": {"command": "x"}}})
    )
    theirs = {"matcher": "", "hooks": [{"type": "command", "command": "notify-send done"}]}
    (home / ".claude" / "settings.json").write_text(
        json.dumps({"model": "opus", "hooks": {"Stop": [theirs]}})
    )
    args = {
        "scope": "user",
        "command": COMMAND,
        "env": {"MCP_MEMORY_DSN": "postgres://x"},
        "cwd": tmp_path,
        "environ": {"HOME": str(home)},
    }

    changes = register(**args)
    assert len(changes) == 1 + len(HOOK_EVENTS) + 1  # + the SessionStart recall hook
    config = json.loads((home / ".claude.json").read_text())
    assert config["numStartups"] == 3 and config["mcpServers"]["other"] == {"command": "x"}
    assert config["mcpServers"]["mcp-memory"] == {
        "type": "stdio", "command": COMMAND[0], "args": ["serve"], "env": {"MCP_MEMORY_DSN": "postgres://x"}
    }  # fmt: skip
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings["model"] == "opus" and settings["hooks"]["Stop"][0] == theirs
    for event in HOOK_EVENTS:  # the hooks select the same profile as the server entry
        ours = [h for g in settings["hooks"][event] for h in g["hooks"] if h["command"] == f"MCP_MEMORY_DSN=postgres://x {HOOK}"]
        assert len(ours) == 1 and ours[0]["type"] == "command"
    recall = [h["command"] for g in settings["hooks"][RECALL_EVENT] for h in g["hooks"]]
    assert [shlex.split(c) for c in recall] == [["MCP_MEMORY_DSN=postgres://x", *COMMAND, "recall", "--hook",
                                                 "--agent", "claude-code"]]

    assert register(**args) == []  # second run: nothing to do

    # the recall hook of earlier versions (no --agent) is ours: replaced, not doubled
    settings["hooks"][RECALL_EVENT][0]["hooks"][0]["command"] = shlex.join([*COMMAND, "recall", "--hook"])
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    assert register(**args) == [f"{home / '.claude' / 'settings.json'}: set {RECALL_EVENT} hook: {recall[0]}"]
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert [h["command"] for g in settings["hooks"][RECALL_EVENT] for h in g["hooks"]] == recall

    removed = register(**args, uninstall=True)
    assert len(removed) == 1 + len(HOOK_EVENTS) + 1
    config = json.loads((home / ".claude.json").read_text())
    assert config == {"numStartups": 3, "mcpServers": {"other": {"command": "x"}}}
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings == {"model": "opus", "hooks": {"Stop": [theirs]}}
    assert register(**args, uninstall=True) == []
    assert not list(home.rglob(".*.json.*"))  # no temporary files left behind


def test_project_scope_and_config_dir(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    changes = register(
        scope="project", command=COMMAND, env={}, cwd=project, environ={"HOME": str(tmp_path / "h")}
    )
    assert changes
    assert (
        json.loads((project / ".mcp.json").read_text())["mcpServers"]["mcp-memory"]["command"] == COMMAND[0]
    )
    assert "SessionEnd" in json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    assert not (tmp_path / "h").exists()

    config_dir = tmp_path / "cfg"
    environ = {"HOME": str(tmp_path / "h2"), "CLAUDE_CONFIG_DIR": str(config_dir)}
    register(scope="user", command=COMMAND, env={}, cwd=project, environ=environ)
    assert (config_dir / "settings.json").is_file() and (config_dir / ".claude.json").is_file()
    assert not (tmp_path / "h2").exists()


def test_refuses_broken_json(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text("{oops")
    with pytest.raises(ValueError, match="not valid JSON"):
        register(scope="project", command=COMMAND, env={}, cwd=tmp_path, environ={"HOME": str(tmp_path)})
    assert (tmp_path / ".mcp.json").read_text() == "{oops"
