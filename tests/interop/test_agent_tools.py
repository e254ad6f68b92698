"""The real OpenCode, Codex and Gemini CLI, after `mcp-memory install AGENT`, call our MCP tools for
their model.

The scripted model (tests/interop/scripted_model.py: OpenAI Chat Completions for OpenCode, OpenAI
Responses for Codex, Gemini streamGenerateContent for Gemini CLI) asks for create_session,
append_message, search_messages, record_decision and recall in turn; the test asserts, from the
requests the CLI sent it, what the model received as each tool's result. A CLI not on PATH is skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_runs import FINAL, PROMPT, headless, install, make_home, memory_tools_script, missing
from scripted_model import ScriptedModel, result_json, tool_results, transcript

pytestmark = pytest.mark.interop

AGENTS = [pytest.param(a, marks=pytest.mark.skipif(missing(a), reason=f"{a} CLI is not on PATH"))
          for a in ("opencode", "codex", "gemini")]


@pytest.mark.parametrize("agent", AGENTS)
def test_agent_shows_its_model_our_tool_results(agent: str, tmp_path: Path, settings, profile) -> None:
    home = make_home(agent, tmp_path / agent, tmp_path / "work", settings.dsn, profile)
    install(home)
    with ScriptedModel(memory_tools_script) as model:
        run = headless(home, model.url, PROMPT)
        requests = model.main_requests()
    assert requests, run.stdout[-2000:]
    assert PROMPT in json.dumps(transcript(requests[0]))
    last = requests[-1]
    results = tool_results(last)
    assert len(results) == 5 and not any(r["is_error"] for r in results), results
    created, appended, found, decided, recalled = (result_json(r["text"]) for r in results)
    session_id = created["session_id"]
    assert session_id.startswith("ses_")
    assert (appended["seq"], appended["duplicate"]) == (1, False)
    assert [(m["session_id"], m["seq"]) for m in found["matches"]] == [(session_id, 1)]
    assert "zebraledger" in found["matches"][0]["snippet"]
    assert decided["decision_id"] and decided["version"] == 1
    assert "zebraledger lives in PostgreSQL" in recalled["text"] and "accepted" in recalled["text"]
    assert FINAL in run.stdout
