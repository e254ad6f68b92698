"""Registering mcp-memory in Gemini CLI's settings.json: the MCP server and the capture/recall hooks,
user and project scope, merge with the user's own entries, uninstall."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_memory.agents.gemini import install as gemini

ENTRY = {"command": "/bin/mcp-memory", "args": ["serve"], "env": {"MCP_MEMORY_DSN": "x"}}
CAPTURE = "MCP_MEMORY_DSN=x /bin/mcp-memory sync gemini --hook"
RECALL = "MCP_MEMORY_DSN=x /bin/mcp-memory recall --hook --agent gemini"
THEIRS = {"matcher": "", "hooks": [{"type": "command", "command": "notify-send done", "name": "mine"}]}


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
    original = {"model": {"name": "gemini-2.5-pro"}, "mcpServers": {"other": {"command": "other"}},
                "hooks": {"AfterAgent": [THEIRS], "BeforeTool": [THEIRS]}}
    settings.write_text(json.dumps(original))
    lines = run(tmp_path, scope)
    assert lines[0] == f"{settings}: added MCP server mcp-memory (/bin/mcp-memory serve)"
    assert [line.split(" hook ")[0] for line in lines[1:]] == [
        f"{settings}: set AfterAgent", f"{settings}: set SessionEnd", f"{settings}: set BeforeAgent"]
    assert "captures the new messages of each finished turn" in lines[1] and lines[1].endswith(CAPTURE)
    assert "recall" in lines[3] and lines[3].endswith(RECALL)
    data = json.loads(settings.read_text())
    assert (
        data["mcpServers"] == {"other": {"command": "other"}, "mcp-memory": ENTRY}
        and data["model"] == original["model"]
    )
    hooks = data["hooks"]
    assert hooks["BeforeTool"] == [THEIRS] and hooks["AfterAgent"][0] == THEIRS
    ours = {event: groups[-1]["hooks"] for event, groups in hooks.items() if event != "BeforeTool"}
    assert {event: [(h["name"], h["command"], h["timeout"]) for h in handlers] for event, handlers in ours.items()} == {
        "AfterAgent": [("mcp-memory-capture", CAPTURE, 30000)], "SessionEnd": [("mcp-memory-capture", CAPTURE, 30000)],
        "BeforeAgent": [("mcp-memory-recall", RECALL, 30000)]}
    assert run(tmp_path, scope) == []
    assert run(tmp_path, scope, uninstall=True) == [
        f"{settings}: removed MCP server mcp-memory", f"{settings}: removed AfterAgent hook",
        f"{settings}: removed SessionEnd hook", f"{settings}: removed BeforeAgent hook"]
    assert json.loads(settings.read_text()) == original


def test_a_changed_command_replaces_our_hook_in_place_of_a_second_one(tmp_path):
    run(tmp_path)
    gemini.register(scope="user", command=["/opt/mcp-memory"], env={}, cwd=tmp_path / "proj",
                    environ={"HOME": str(tmp_path / "home")})
    hooks = json.loads((tmp_path / "home" / ".gemini" / "settings.json").read_text())["hooks"]
    assert [h["command"] for g in hooks["AfterAgent"] for h in g["hooks"]] == ["/opt/mcp-memory sync gemini --hook"]


def test_our_hook_under_an_event_no_longer_used_is_removed(tmp_path):
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    old = {"type": "command", "name": "mcp-memory-recall", "command": RECALL}
    settings.write_text(json.dumps({"hooks": {"SessionStart": [THEIRS, {"matcher": "", "hooks": [old]}]}}))
    assert f"{settings}: removed SessionStart hook" in run(tmp_path)
    assert json.loads(settings.read_text())["hooks"]["SessionStart"] == [THEIRS]


def test_disabled_hooks_are_reported(tmp_path):
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"hooksConfig": {"enabled": False, "disabled": ["mcp-memory-recall"]}}))
    lines = run(tmp_path)
    assert any("hooksConfig.enabled is false" in line for line in lines)
    assert any("hooksConfig.disabled lists mcp-memory-recall" in line for line in lines)


def test_hooks_that_are_not_a_list_are_refused(tmp_path):
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"hooks": {"AfterAgent": {"command": "x"}}}))
    with pytest.raises(ValueError, match=r"hooks\.AfterAgent is not a list"):
        run(tmp_path)
    assert json.loads(settings.read_text()) == {"hooks": {"AfterAgent": {"command": "x"}}}


def test_new_file_and_gemini_cli_home(tmp_path):
    environ = {"HOME": str(tmp_path / "home"), "GEMINI_CLI_HOME": str(tmp_path / "g")}
    gemini.register(scope="user", command=["mcp-memory"], env={}, cwd=tmp_path, environ=environ)
    data = json.loads((tmp_path / "g" / ".gemini" / "settings.json").read_text())
    assert data["mcpServers"] == {"mcp-memory": {"command": "mcp-memory", "args": ["serve"], "env": {}}}
    assert set(data["hooks"]) == {"AfterAgent", "SessionEnd", "BeforeAgent"}
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
