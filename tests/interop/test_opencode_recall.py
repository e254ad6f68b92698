"""The real OpenCode 1.18.33, after `mcp-memory install opencode`, shows its model the project's memory
at the first turn (the plugin's `experimental.chat.system.transform` hook runs `recall --hook --agent
opencode`), and names our MCP tools `mcp-memory_<tool>` in what it stores, which capture keeps.

A scripted model on loopback plays the model (tests/interop/scripted_model.py). Skipped without the
`opencode` binary; nothing leaves the machine.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from agent_runs import PROMPT, headless, install, make_home, memory_tools_script, missing
from scripted_model import ScriptedModel

from mcp_memory.agents.opencode.adapter import OpenCodeAdapter, default_db_path
from mcp_memory.config import load_settings
from mcp_memory.wiring import build

pytestmark = [pytest.mark.interop, pytest.mark.skipif(missing("opencode"), reason="opencode is not on PATH")]


def test_first_request_carries_the_projects_recall(tmp_path: Path, settings, profile) -> None:
    home = make_home("opencode", tmp_path / "oc", tmp_path / "orders-service", settings.dsn, profile)
    install(home)
    svc = build(replace(load_settings(dsn=settings.dsn, environ=profile)))
    try:
        sid = svc.create_session(home.work.name, {"title": "ledger talk"}).session_id
        svc.record_decision(sid, "database", "wombatledger stays in PostgreSQL", rationale="one database to run")
    finally:
        svc.db.close()
    with ScriptedModel(lambda request: [{"type": "text", "text": "Hello."}]) as model:
        headless(home, model.url, "Say hello.")
        requests = model.main_requests()
    assert requests
    system = [m for m in requests[0]["messages"] if m["role"] == "system"]
    assert "wombatledger stays in PostgreSQL" in json.dumps(system, ensure_ascii=False)
    assert "Say hello." in json.dumps(requests[0]["messages"][-1], ensure_ascii=False)


def test_no_memory_means_no_recall_and_the_run_still_works(tmp_path: Path, settings, profile) -> None:
    home = make_home("opencode", tmp_path / "oc", tmp_path / "empty-project", settings.dsn, profile)
    install(home)
    with ScriptedModel(lambda request: [{"type": "text", "text": "Hello."}]) as model:
        run = headless(home, model.url, "Say hello.")
        requests = model.main_requests()
    assert requests and "Hello." in run.stdout
    assert "wombatledger" not in json.dumps(requests[0], ensure_ascii=False)


def test_our_tool_calls_keep_the_name_opencode_shows_its_model(tmp_path: Path, settings, profile) -> None:
    home = make_home("opencode", tmp_path / "oc", tmp_path / "work", settings.dsn, profile)
    install(home)
    with ScriptedModel(memory_tools_script) as model:
        headless(home, model.url, PROMPT)
        offered = {tool["function"]["name"] for tool in model.main_requests()[0]["tools"]}
    sessions = OpenCodeAdapter().read([default_db_path(home.env)])
    calls = [c.function.name for s in sessions for m in s.messages for c in m.tool_calls or []]
    assert calls == ["mcp-memory_create_session", "mcp-memory_append_message", "mcp-memory_search_messages",
                     "mcp-memory_record_decision", "mcp-memory_recall"]
    assert set(calls) <= offered
