"""Agent scaffolding and echoes of mcp-memory's own tools (mcp_memory/scaffolding.py): kept in the
session, left out of search, recall, the conversation view and relays into another agent."""

from __future__ import annotations

import json

import pytest

from mcp_memory import scaffolding
from mcp_memory.errors import Conflict
from mcp_memory.schema import MessageIn

ECHO_WORDS = "refunds nightly batch queue settlement ledger"


@pytest.mark.parametrize(("name", "tool"), [
    ("mcp__mcp-memory__search_messages", "search_messages"),
    ("mcp-memory_recall", "recall"),
    ("mcp-memory__read_session", "read_session"),
    ("mcp_memory.recall", "recall"),
    ("mcp__mcp_memory__recall", "recall"),
    ("mcp_mcp-memory_recall", "recall"),
    ("search_messages", None),
    ("mcp__other__recall", None),
    ("mcp__mcp-memory-evil__recall", None),
    ("xmcp-memory_recall", None),
    (None, None),
])
def test_memory_tools_are_known_by_the_server_name(name, tool) -> None:
    assert scaffolding.memory_tool(name) == tool


def _call(call_id: str, name: str, arguments: dict | None = None) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments or {"query": "refunds"})}}


def test_echo_turns_are_calls_and_results_of_memory_tools_only() -> None:
    ask = {"role": "assistant", "tool_calls": [_call("c1", "mcp__mcp-memory__search_messages")]}
    said = {"role": "assistant", "content": "Let me look.", "tool_calls": [_call("c2", "mcp__mcp-memory__recall")]}
    mixed = {"role": "assistant", "tool_calls": [_call("c3", "mcp__mcp-memory__recall"), _call("c4", "Bash")]}
    calls = scaffolding.memory_calls([ask, said, mixed])
    assert calls == {"c1": "search_messages", "c2": "recall", "c3": "recall"}
    assert scaffolding.echo_tool(ask, calls) == "search_messages"
    assert scaffolding.echo_tool(said, calls) is None  # the agent's own words are conversation
    assert scaffolding.echo_tool(mixed, calls) is None
    assert scaffolding.echo_tool({"role": "tool", "tool_call_id": "c1", "content": "x"}, calls) == "search_messages"
    assert scaffolding.echo_tool({"role": "tool", "tool_call_id": "c4", "content": "x"}, calls) is None
    assert scaffolding.echo_tool({"role": "tool", "tool_call_id": "zz", "name": "mcp-memory_recall"}, {}) == "recall"
    assert scaffolding.unanswered([{"role": "tool", "tool_call_id": "old"}], calls) == ["old"]


def test_another_agent_receives_no_scaffolding() -> None:
    messages = [
        MessageIn(role="user", content="<environment_context>cwd</environment_context>",
                  metadata={"scaffold": "environment"}),
        MessageIn(role="user", content=[{"type": "text", "text": "fix the refunds"},
                                        {"type": "text", "text": "<system-reminder>x</system-reminder>",
                                         "scaffold": "reminder"}]),
        MessageIn(role="user", content=[{"type": "text", "text": "<system-reminder>y</system-reminder>",
                                         "scaffold": "reminder"}]),
        MessageIn(role="assistant", content="done"),
    ]
    kept, left_out = scaffolding.without_scaffolding(messages)
    assert left_out == 2
    assert [m.content if isinstance(m.content, str) else [p.text for p in m.content] for m in kept] == \
        [["fix the refunds"], "done"]
    assert len(messages[1].content) == 2  # the caller's messages are not changed


# -- on the database -------------------------------------------------------------------------------
def _conversation(service, project: str = "echoes") -> str:
    session = service.create_session(project, {"agent_source": "claude-code", "title": "refunds"})
    sid = session.session_id
    service.append_messages(sid, [
        MessageIn(role="system", content="You are Claude Code. Scaffolding words: zebrafish marmoset.",
                  metadata={"scaffold": "instructions"}),
        MessageIn(role="user", content=[{"type": "text", "text": "How are refunds handled today?"},
                                        {"type": "text", "text": "<system-reminder>quokka pangolin</system-reminder>",
                                         "scaffold": "reminder"}]),
        MessageIn(role="assistant", tool_calls=[_call("call-1", "mcp__mcp-memory__search_messages")]),
        MessageIn(role="tool", tool_call_id="call-1",
                  content=f"Earlier match: {ECHO_WORDS}. " + "padding " * 200),
    ])
    return sid


def _seqs(result) -> set[int]:
    return {m.seq for m in result.matches}


def test_search_and_recall_leave_out_echoes_and_scaffolding(service) -> None:
    sid = _conversation(service)
    service.append_messages(sid, [MessageIn(role="assistant", content="Refunds go through the nightly batch.")])
    plain = service.search_messages("settlement ledger", project_id="echoes", hits_only=True)
    assert plain.matches == []  # the words are only in an earlier search result
    echoes = service.search_messages("settlement ledger", project_id="echoes", hits_only=True, include_echoes=True)
    assert _seqs(echoes) == {4}
    assert service.search_messages("refunds", project_id="echoes", hits_only=True).matches
    assert all(m.seq != 4 for m in service.search_messages("refunds", project_id="echoes").matches)
    for word in ("zebrafish", "quokka"):
        assert service.search_messages(word, project_id="echoes", include_echoes=True).matches == []
    recall = service.recall("settlement ledger refunds", project_id="echoes")
    assert "settlement" not in recall.text
    assert "settlement" in service.recall("settlement ledger refunds", project_id="echoes", include_echoes=True).text


def test_a_result_indexed_after_its_call_is_still_an_echo(service) -> None:
    session = service.create_session("echoes", {"agent_source": "opencode"})
    sid = session.session_id
    service.append_messages(sid, [MessageIn(role="assistant", tool_calls=[_call("late", "mcp-memory_recall")])])
    service.reindex_search("echoes")  # the call is indexed in a pass of its own
    service.append_messages(sid, [MessageIn(role="tool", tool_call_id="late", content=f"recall said {ECHO_WORDS}")])
    assert service.search_messages("settlement", project_id="echoes").matches == []
    assert _seqs(service.search_messages("settlement", project_id="echoes", include_echoes=True,
                                         hits_only=True)) == {2}


def test_conversation_view_leaves_out_scaffolding_and_shortens_echoes(service) -> None:
    sid = _conversation(service)
    page = service.read_session(sid, limit=100)
    assert page.scaffolding == 1
    assert [t.seq for t in page.messages] == [2, 3, 4]
    assert page.messages[0].content == "How are refunds handled today?"
    echo = page.messages[2].content
    assert echo.startswith("Earlier match:") and "more characters; view=full has them" in echo
    assert len(echo) < 500
    full = service.read_session(sid, limit=100, view="full")
    assert [m.seq for m in full.messages] == [1, 2, 3, 4]
    assert full.messages[0].metadata["scaffold"] == "instructions"
    assert full.messages[1].content[1].scaffold == "reminder"
    assert full.scaffolding is None


def test_a_relay_into_another_agent_carries_no_scaffolding(service) -> None:
    sid = _conversation(service)
    service.append_messages(sid, [MessageIn(role="assistant", content="Refunds go through the nightly batch.")])
    exported = service.export_session(sid, "codex")
    text = "".join(f.content for f in exported.files)
    assert "nightly batch" in text and "How are refunds handled today?" in text
    for word in ("zebrafish", "quokka"):
        assert word not in text
    assert any("scaffolding" in note for note in exported.report["notes"])


def test_importing_again_what_an_earlier_version_stored_unmarked_adds_nothing(service) -> None:
    from mcp_memory.core.imports import append_marked

    sid = service.create_session("echoes", {"agent_source": "codex"}).session_id
    plain = [MessageIn(append_id="env", role="user", content="<environment_context>/w</environment_context>"),
             MessageIn(append_id="ask", role="user", content=[
                 {"type": "text", "text": "fix it"}, {"type": "text", "text": "<skills>x</skills>"}])]
    service.append_messages(sid, plain)  # as stored before adapters marked scaffolding
    marked = [MessageIn(append_id="env", role="user", content="<environment_context>/w</environment_context>",
                        metadata={"scaffold": "environment"}),
              MessageIn(append_id="ask", role="user", content=[
                  {"type": "text", "text": "fix it"},
                  {"type": "text", "text": "<skills>x</skills>", "scaffold": "skills"}]),
              MessageIn(append_id="new", role="assistant", content="fixed")]
    result = append_marked(lambda batch: service.append_messages(sid, batch), marked)
    assert result.duplicates == [True, True, False] and result.seqs == [1, 2, 3]
    with pytest.raises(Conflict, match="different payload"):  # a real difference still conflicts
        append_marked(lambda batch: service.append_messages(sid, batch), [MessageIn(append_id="new", role="assistant", content="other",
                                               metadata={"scaffold": "other"})])
