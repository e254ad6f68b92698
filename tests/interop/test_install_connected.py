"""`mcp-memory install AGENT`, proven by the agents themselves, in a fresh home each.

Claude Code, OpenCode and Gemini CLI check their own MCP servers: `claude mcp list`, `opencode mcp
list` and `gemini mcp list` start every registered server and say whether it connected. For Codex and
Hermes the test reads the entry install wrote ($CODEX_HOME/config.toml, $HERMES_HOME/config.yaml),
starts exactly that command with that env, and talks MCP to it with the official Python client.
Every install runs twice: re-running it must keep a working entry. Agents whose CLI is not on PATH
are skipped; Codex and Hermes need only the entry, not their CLI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest
from agent_runs import opencode_env
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from ruamel.yaml import YAML
from scripted_model import ScriptedModel

pytestmark = pytest.mark.interop

TOOLS = {"create_session", "append_message", "search_messages", "record_decision", "recall", "read_session"}


def fresh_env(tmp_path: Path, profile: dict[str, str], dsn: str) -> dict[str, str]:
    """A new HOME and XDG dirs, the test database selected by MCP_MEMORY_DSN, nothing of the
    machine's agent settings."""
    env = {k: v for k, v in profile.items()
           if not k.startswith(("ANTHROPIC_", "CLAUDE_", "OPENCODE", "XDG_", "CODEX_", "GEMINI_", "GOOGLE_",
                                "HERMES_", "OPENAI_"))}
    for name in ("home", "data", "config", "cache", "state"):
        (tmp_path / name).mkdir()
    env.update(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_CACHE_HOME=str(tmp_path / "cache"),
               XDG_STATE_HOME=str(tmp_path / "state"), MCP_MEMORY_DSN=dsn, TERM="dumb", LANG="C.UTF-8",
               NO_COLOR="1")
    return env


def install_twice(agent: str, env: dict[str, str], cwd: Path) -> None:
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "mcp_memory", "install", agent], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr


def run_cli(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stdout + done.stderr)


def our_line(output: str) -> str:
    """The line naming our server (OpenCode prints its command on the next line)."""
    lines = [line for line in output.splitlines() if "mcp-memory" in line]
    assert lines, output
    return lines[0]


@pytest.fixture
def home(tmp_path: Path, profile: dict[str, str], settings) -> tuple[dict[str, str], Path]:
    work = tmp_path / "work"
    work.mkdir()
    return fresh_env(tmp_path, profile, settings.dsn), work


@pytest.mark.skipif(shutil.which("claude") is None, reason="claude (Claude Code CLI) is not on PATH")
def test_claude_mcp_list_shows_it_connected(home) -> None:
    env, work = home
    (Path(env["HOME"]) / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "projects": {str(work): {"hasTrustDialogAccepted": True}}}))
    env.update(DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    install_twice("claude-code", env, work)
    line = our_line(run_cli(["claude", "mcp", "list"], env, work))
    assert line.endswith("Connected") and " serve" in line, line


@pytest.mark.skipif(shutil.which("opencode") is None, reason="opencode is not on PATH")
def test_opencode_mcp_list_shows_it_connected(home) -> None:
    env, work = home
    install_twice("opencode", env, work)
    with ScriptedModel(lambda request: []) as registry:  # answers OpenCode's npm look-ups with 404 at once
        env.update(opencode_env(registry.url))
        output = run_cli(["opencode", "mcp", "list"], env, work)
    line = our_line(output)
    assert "✓ mcp-memory connected" in line and "failed" not in output, output


@pytest.mark.skipif(shutil.which("gemini") is None, reason="gemini (Gemini CLI) is not on PATH")
def test_gemini_mcp_list_shows_it_connected(home) -> None:
    env, work = home
    settings_dir = Path(env["HOME"]) / ".gemini"
    settings_dir.mkdir()
    (settings_dir / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}}))
    env.update(GEMINI_API_KEY="dummy", GEMINI_CLI_NO_RELAUNCH="true")
    install_twice("gemini", env, work)
    line = our_line(run_cli(["gemini", "mcp", "list"], env, work))
    assert "Connected" in line and "Disconnected" not in line, line
    # install kept the settings it found
    assert json.loads((settings_dir / "settings.json").read_text())["telemetry"] == {"enabled": False}


async def _tools_over_stdio(command: str, args: list[str], env: dict[str, str], cwd: Path) -> set[str]:
    params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            info = await session.initialize()
            assert info.server_info.name
            listed = await session.list_tools()
    return {tool.name for tool in listed.tools}


def answers_tools_list(entry: dict, base_env: dict[str, str], cwd: Path) -> None:
    """Start exactly the entry's command with the entry's env (over a bare PATH/HOME, as an agent
    does) and expect the mcp-memory tools."""
    env = {"PATH": os.environ["PATH"], "HOME": base_env["HOME"], **(entry.get("env") or {})}
    assert "MCP_MEMORY_DSN" in env, entry  # the profile selection travelled into the entry
    tools = anyio.run(_tools_over_stdio, entry["command"], list(entry.get("args") or []), env, cwd)
    assert tools >= TOOLS, tools


def test_codex_entry_answers_tools_list(home) -> None:
    env, work = home
    env["CODEX_HOME"] = str(Path(env["HOME"]) / "codex")
    Path(env["CODEX_HOME"]).mkdir()
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.write_text('model = "gpt-5.5"\n\n[analytics]\nenabled = false\n')
    install_twice("codex", env, work)
    document = tomllib.loads(config.read_text())
    assert document["model"] == "gpt-5.5" and document["analytics"] == {"enabled": False}
    entry = document["mcp_servers"]["mcp-memory"]
    assert entry["args"][-1] == "serve"
    answers_tools_list(entry, env, work)


def test_hermes_entry_answers_tools_list(home) -> None:
    env, work = home
    env["HERMES_HOME"] = str(Path(env["HOME"]) / "hermes")
    Path(env["HERMES_HOME"]).mkdir()
    config = Path(env["HERMES_HOME"]) / "config.yaml"
    config.write_text("model: some-model  # kept\n")
    install_twice("hermes", env, work)
    document = YAML(typ="safe").load(config.read_text())
    assert document["model"] == "some-model" and "# kept" in config.read_text()
    entry = document["mcp_servers"]["mcp-memory"]
    assert entry["args"][-1] == "serve"
    answers_tools_list(entry, env, work)
