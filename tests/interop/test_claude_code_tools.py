"""The real Claude Code, after `mcp-memory install claude-code`, calls our MCP tools for its model, and
its SessionStart hook shows the model the project's memory.

A scripted model server on loopback (tests/interop/scripted_model.py) plays the model: it asks for
create_session, append_message, search_messages, record_decision and recall in turn, and the test
asserts, from the requests Claude Code sent it, what the model received as each tool's result. The
Stop hook that `install` added captures the run itself into the same database. Needs `claude` on
PATH; skipped otherwise. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from agent_runs import FINAL, PROMPT, memory_tools_script
from scripted_model import ScriptedModel, tool_results

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(shutil.which("claude") is None, reason="claude (Claude Code CLI) is not on PATH"),
]

@pytest.fixture
def claude_home(tmp_path: Path, settings, profile: dict[str, str]) -> tuple[dict[str, str], Path]:
    home, work = tmp_path / "claude-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "numStartups": 1,
        "customApiKeyResponses": {"approved": ["sk-ant-dummy"], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True}}}))
    env = {k: v for k, v in profile.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update(HOME=str(home), ANTHROPIC_API_KEY="sk-ant-dummy", DISABLE_AUTOUPDATER="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1", ENABLE_TOOL_SEARCH="false", MCP_MEMORY_DSN=settings.dsn)
    done = subprocess.run([sys.executable, "-m", "mcp_memory", "install", "claude-code"], env=env, cwd=work,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return env, work


def test_claude_code_shows_its_model_our_tool_results(claude_home, settings) -> None:
    env, work = claude_home
    with ScriptedModel(memory_tools_script) as model:
        run = subprocess.run(["claude", "-p", PROMPT, "--allowedTools", "mcp__mcp-memory", "--output-format", "json"],
                             env={**env, "ANTHROPIC_BASE_URL": model.url}, cwd=work, capture_output=True,
                             text=True, timeout=240, stdin=subprocess.DEVNULL)
        requests = model.main_requests()
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    assert json.loads(run.stdout)["result"] == FINAL
    results = tool_results(requests[-1])
    assert len(results) == 5 and not any(r["is_error"] for r in results), results
    created, appended, found, decided, recalled = (json.loads(r["text"]) for r in results)
    session_id = created["session_id"]
    assert session_id.startswith("ses_")
    assert (appended["seq"], appended["duplicate"]) == (1, False)
    assert [(m["session_id"], m["seq"]) for m in found["matches"]] == [(session_id, 1)]
    assert "zebraledger" in found["matches"][0]["snippet"]
    assert decided["decision_id"] and decided["version"] == 1
    assert "zebraledger lives in PostgreSQL" in recalled["text"] and "accepted" in recalled["text"]
    # the prompt reached the model
    assert PROMPT in json.dumps(requests[0]["messages"])

    # the Stop hook install added captured this very run (the prompt and the final answer)
    with psycopg.connect(settings.dsn) as conn:
        texts = [r[0] for r in conn.execute(
            "SELECT m.payload::text FROM messages m JOIN sessions s USING (session_id) "
            "WHERE s.agent_source = 'claude-code' ORDER BY m.seq").fetchall()]
    assert any(PROMPT in t for t in texts) and any("ledger stays in PostgreSQL" in t for t in texts)


def test_session_start_hook_shows_its_model_the_projects_memory(claude_home, settings, profile) -> None:
    """The SessionStart hook `install` added (`recall --hook --agent claude-code`) puts the recall
    block of the working folder's project into what the model reads at the first turn."""
    from dataclasses import replace

    from mcp_memory.config import load_settings
    from mcp_memory.wiring import build

    env, work = claude_home
    svc = build(replace(load_settings(dsn=settings.dsn, environ=profile)))
    try:
        sid = svc.create_session(work.name, {"title": "ledger talk"}).session_id
        svc.record_decision(sid, "database", "quokkaledger stays in PostgreSQL", rationale="one database to run")
    finally:
        svc.db.close()
    with ScriptedModel(lambda request: [{"type": "text", "text": "Hello."}]) as model:
        run = subprocess.run(["claude", "-p", "Say hello.", "--output-format", "json"],
                             env={**env, "ANTHROPIC_BASE_URL": model.url}, cwd=work, capture_output=True,
                             text=True, timeout=240, stdin=subprocess.DEVNULL)
        requests = model.main_requests()
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    first = json.dumps(requests[0], ensure_ascii=False)
    assert "quokkaledger stays in PostgreSQL" in first and "Say hello." in first
