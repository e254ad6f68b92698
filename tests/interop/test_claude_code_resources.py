"""The real Claude Code lists and reads mcp-memory's memory:// resources for its model.

After `mcp-memory install claude-code`, Claude Code offers its model the ListMcpResourcesTool and
ReadMcpResourceTool tools for the servers that have resources. A scripted model server on loopback
(tests/interop/scripted_model.py) asks for the resource list, then reads the project's digest and
a session named in that list; the test asserts, from the requests Claude Code sent to the model,
what the model received. Needs `claude` on PATH; skipped otherwise. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from scripted_model import ScriptedModel, can_call, tool_results

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(shutil.which("claude") is None, reason="claude (Claude Code CLI) is not on PATH"),
]
PROJECT = "resource-shop"
FINAL = "I have read the project's digest."
SESSION_URI = re.compile(r"memory://sessions/ses_[0-9a-f-]{36}")


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
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1", ENABLE_TOOL_SEARCH="false",
               MCP_MEMORY_DSN=settings.dsn)
    done = subprocess.run([sys.executable, "-m", "mcp_memory", "install", "claude-code"], env=env, cwd=work,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return env, work


@pytest.fixture
def history(settings, profile) -> dict[str, str]:
    from mcp_memory.config import load_settings
    from mcp_memory.wiring import build

    svc = build(replace(load_settings(dsn=settings.dsn, environ=profile)))
    try:
        sid = svc.create_session(PROJECT, {"title": "pangolin ledger"}).session_id
        svc.append_messages(sid, [
            {"role": "user", "content": "Where does the pangolin ledger live?", "created_at": "2026-03-01T09:00:00Z"},
            {"role": "assistant", "content": "In PostgreSQL.", "created_at": "2026-03-01T09:01:00Z"},
            {"role": "assistant", "created_at": "2026-03-01T09:02:00Z", "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "Edit", "arguments": json.dumps({"file_path": "src/pangolin.py"})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok", "created_at": "2026-03-01T09:03:00Z"},
        ])
        decision = svc.record_decision(sid, "database", "The pangolin ledger stays in PostgreSQL",
                                       message_seq=2).decision_id
    finally:
        svc.db.close()
    return {"session": sid, "decision": decision}


def resources_script(request: dict[str, Any]) -> list[dict[str, Any]]:
    """List the resources, read the project's digest, then the session the list names."""
    if not can_call(request, "ListMcpResourcesTool") or not can_call(request, "ReadMcpResourceTool"):
        return [{"type": "text", "text": "No MCP resource tools are offered."}]
    results = tool_results(request)
    if not results:
        return [{"type": "tool_use", "name": "ListMcpResourcesTool", "input": {"server": "mcp-memory"}}]
    if len(results) == 1:
        return [{"type": "tool_use", "name": "ReadMcpResourceTool",
                 "input": {"server": "mcp-memory", "uri": f"memory://projects/{PROJECT}/digest"}}]
    if len(results) == 2:
        found = SESSION_URI.search(results[0]["text"])
        if found is None:
            return [{"type": "text", "text": "The list named no session: " + results[0]["text"][:300]}]
        return [{"type": "tool_use", "name": "ReadMcpResourceTool",
                 "input": {"server": "mcp-memory", "uri": found.group(0)}}]
    return [{"type": "text", "text": FINAL}]


def test_claude_code_lists_and_reads_our_resources(claude_home, history) -> None:
    env, work = claude_home
    with ScriptedModel(resources_script) as model:
        run = subprocess.run(["claude", "-p", "What does the memory say about this project?",
                              "--allowedTools", "mcp__mcp-memory,ListMcpResourcesTool,ReadMcpResourceTool",
                              "--output-format", "json"],
                             env={**env, "ANTHROPIC_BASE_URL": model.url}, cwd=work, capture_output=True,
                             text=True, timeout=240, stdin=subprocess.DEVNULL)
        requests = model.main_requests()
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    assert json.loads(run.stdout)["result"] == FINAL, run.stdout[-2000:]
    listed, digest, session = tool_results(requests[-1])
    assert not any(r["is_error"] for r in (listed, digest, session)), (listed, digest, session)
    # the model saw the concrete resources of resources/list …
    assert f"memory://sessions/{history['session']}" in listed["text"]
    assert f"memory://projects/{PROJECT}/digest" in listed["text"]
    # … the digest, each line with its source …
    assert f"Digest of project {PROJECT}, 2026-03-01" in digest["text"]
    assert "The pangolin ledger stays in PostgreSQL" in digest["text"] and history["decision"] in digest["text"]
    assert "`src/pangolin.py` [Edit]" in digest["text"] and f"{history['session']}#3" in digest["text"]
    # … and the session the list named, as the conversation view
    assert "Where does the pangolin ledger live?" in session["text"] and "pangolin ledger" in session["text"]
