"""A real agent's session full of calls to mcp-memory's own tools is stored whole, but its echoes
(the calls of search_messages and recall and what they returned) do not come back as memory.

Each CLI, installed with `mcp-memory install AGENT`, runs the memory-tools script (create_session,
append_message, search_messages, record_decision, recall, all about "zebraledger"); its own native
session is then imported. Searching "zebraledger" must find the one message that said it, not the
agent's tool calls that searched for it nor the results that quoted it, in the top 10; with
include_echoes they are there. Agents not on PATH are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_runs import headless, install, make_home, mcp_memory, memory_tools_script, missing
from scripted_model import ScriptedModel, tool_results

pytestmark = pytest.mark.interop

AGENTS = [pytest.param(a, marks=pytest.mark.skipif(missing(a), reason=f"{a} CLI is not on PATH"))
          for a in ("claude-code", "opencode", "codex", "gemini")]


def native_files(env: dict[str, str], agent: str) -> list[Path]:
    root = Path(env["HOME"])
    return [{"claude-code": Path(env.get("CLAUDE_CONFIG_DIR", root / ".claude")) / "projects",
             "opencode": Path(env.get("XDG_DATA_HOME", root / ".local" / "share")) / "opencode" / "opencode.db",
             "codex": Path(env.get("CODEX_HOME", root / ".codex")) / "sessions",
             "gemini": root / ".gemini" / "tmp"}[agent]]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_session_of_memory_tool_calls_leaves_no_echo_in_search(agent: str, tmp_path: Path, settings,
                                                                 profile, service) -> None:
    home = make_home(agent, tmp_path / agent, tmp_path / "work", settings.dsn, profile)
    install(home)
    with ScriptedModel(memory_tools_script) as model:
        headless(home, model.url, "Remember our ledger choice, please.")
        results = tool_results(model.main_requests()[-1])
    assert len(results) == 5 and "zebraledger" in results[4]["text"], results  # recall quoted it
    imported = json.loads(mcp_memory(home.env, home.work, "import", agent,
                                     *map(str, native_files(home.env, agent)), "--project", "echoes",
                                     "--json").stdout)["sessions"]
    own = {s["session_id"] for s in imported if s["messages"]}
    assert own, imported
    stored = [m for sid in own for m in service.read_session(sid, limit=1000, view="full").messages]
    assert sum("zebraledger" in json.dumps(m.model_dump(mode="json")) for m in stored) >= 4  # kept verbatim

    found = service.search_messages("zebraledger", limit=10).matches
    shape = [(m.seq, m.role, [c.function.name for c in m.tool_calls or []], m.tool_call_id) for m in stored]
    assert found and all(m.session_id not in own for m in found), ([(m.session_id, m.seq) for m in found], shape)
    assert any(m.project_id == "interop" for m in found)  # the message the agent appended
    echoes = service.search_messages("zebraledger", limit=50, include_echoes=True).matches
    assert any(m.session_id in own for m in echoes)
    recalled = service.recall("zebraledger", project_id="echoes")
    assert "zebraledger" not in recalled.text, recalled.text
