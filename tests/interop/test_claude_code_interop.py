"""The real Claude Code lists and opens sessions we install (offline, throwaway HOME, driven in tmux).

Recipe: mcp_memory/agents/claude_code/README.md, §Checked against (@anthropic-ai/claude-code 2.1.328). Needs `claude` and
`tmux` on PATH; skipped otherwise. No request leaves the machine: the picker and the rendering of a
resumed conversation need no model, and ANTHROPIC_BASE_URL points at a closed local port.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import NeutralSession, WriteOptions, adapter_for
from mcp_memory.schema import MessageIn

FIXTURES = FIXTURES / "real" / "claude-code"
pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(shutil.which("claude") is None, reason="claude (Claude Code CLI) is not on PATH"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not on PATH"),
]


def foreign_session() -> NeutralSession:
    """A Codex-like session with a tool call, as another agent's adapter would read it."""
    call = {"id": "call_1", "function": {"name": "shell", "arguments": '{"command": ["ls"]}'}}
    messages = [
        MessageIn(role="user", content="Check orders.py please."),
        MessageIn(role="assistant", content="Reading it.", tool_calls=[call], metadata={"model": "gpt-5"}),
        MessageIn(role="tool", tool_call_id="call_1", content="orders.py\nREADME.md"),
        MessageIn(role="assistant", content="Looks fine.", metadata={"model": "gpt-5"}),
    ]
    return NeutralSession("codex", "019a-interop", messages, {"title": "Review orders"})


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir(parents=True)
    home.mkdir()
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "numStartups": 1,
        "customApiKeyResponses": {"approved": ["sk-ant-dummy"], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True}},
    }))  # fmt: skip
    return home, work


@pytest.fixture
def tmux() -> Iterator[str]:
    name = f"mcpmem-cc-{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)


def start_picker(name: str, home: Path, work: Path) -> None:
    env = {"HOME": str(home), "ANTHROPIC_API_KEY": "sk-ant-dummy", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
           "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
           "PATH": os.environ["PATH"], "TERM": "xterm-256color", "LANG": "C.UTF-8"}  # fmt: skip
    command = f"cd {shlex.quote(str(work))} && env -i {' '.join(f'{k}={shlex.quote(v)}' for k, v in env.items())} claude --resume"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "50", command], check=True)


def wait_for(name: str, text: str, timeout: float = 45) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        result = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", name, "-S", "-300"],
            capture_output=True,
            text=True,
            check=False,
        )
        screen = result.stdout
        if text in screen:
            return screen
        time.sleep(0.5)
    raise AssertionError(f"{text!r} did not appear within {timeout}s; screen was:\n{screen}")


def install(session: NeutralSession, home: Path, work: Path) -> str:
    adapter = adapter_for("claude-code")
    written = adapter.install(session, cwd=work, env={"HOME": str(home)}, options=WriteOptions())
    assert written.files[0].parent == adapter.install_dir(work, {"HOME": str(home)})
    assert written.resume_command.endswith(f"claude --resume {written.native_id}")
    return written.native_id


def test_picker_lists_and_opens_a_claude_session(sandbox, tmux) -> None:
    home, work = sandbox
    source = next(FIXTURES.rglob("7f067304-*.jsonl"))
    session = next(s for s in adapter_for("claude-code").read([source]) if s.parent_native_id is None)
    install(session, home, work)
    start_picker(tmux, home, work)
    wait_for(tmux, "Our order module peaks at 200 QPS")
    subprocess.run(["tmux", "send-keys", "-t", tmux, "Enter"], check=True)
    screen = wait_for(tmux, "What about adding a Redis cache")
    assert "Decision: do not add a message queue" in screen
    assert "read 1 file" in screen


def test_picker_lists_and_opens_a_foreign_session(sandbox, tmux) -> None:
    home, work = sandbox
    install(foreign_session(), home, work)
    start_picker(tmux, home, work)
    wait_for(tmux, "Review orders")
    subprocess.run(["tmux", "send-keys", "-t", tmux, "Enter"], check=True)
    screen = wait_for(tmux, "Looks fine.")
    assert "Check orders.py please." in screen and "Reading it." in screen
