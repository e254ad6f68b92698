"""Gemini CLI capture pieces on chats recorded with the real CLI (tests/fixtures/gemini/PROVENANCE.md):
scaffolding marks, MCP call names, relays that carry no scaffolding, the incremental read (turn
boundaries, mid-turn runs, rewinds, cursors that no longer fit), the hook payload and the recall
hook (first prompt only, its output)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import adapter_for, get
from mcp_memory.agents.base import FormatError, NeutralSession, WriteOptions
from mcp_memory.agents.gemini.marks import tool_name

RECORDED = FIXTURES / "gemini" / "session-2026-12-04T17-31-9b982a6b.jsonl"  # recall by SessionStart (before)
AFTER = FIXTURES / "gemini" / "session-2026-12-04T17-41-966c0d36.jsonl"  # recall by BeforeAgent (after)
LINES = RECORDED.read_text(encoding="utf-8").splitlines(keepends=True)
TURN_1 = 11  # lines written by the first run; the second (`--resume`) starts with a header line
PROMPT_1, PROMPT_2 = "Where does the ledger live? Check the memory.", "And how is it backed up?"


def chat(tmp_path: Path, lines: list[str], name: str = "session-2026-12-04T17-31-9b982a6b.jsonl") -> Path:
    path = tmp_path / "chats" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return path


def full(path: Path) -> NeutralSession:
    return adapter_for("gemini").read([path])[0]


def since(path: Path, cursor, settled: bool = True):
    return adapter_for("gemini").read_since(path, cursor, settled=settled)


# -- scaffolding ---------------------------------------------------------------------------------

def test_setup_turn_and_hook_context_are_marked_scaffolding(tmp_path):
    turn_1 = full(chat(tmp_path, LINES[:TURN_1]))
    setup = turn_1.messages[0]
    assert setup.role == "user" and setup.metadata["scaffold"] == "environment"
    assert "This is the Gemini CLI" in setup.content and "Team notes" in setup.content  # GEMINI.md memory
    prompts = [m for s in (turn_1, full(RECORDED)) for m in s.messages if m.role == "user" and "scaffold" not in m.metadata]
    assert len(prompts) == 2
    for message, said in zip(prompts, (PROMPT_1, PROMPT_2), strict=True):
        hook, typed = (part.model_dump() for part in message.content)
        assert hook["scaffold"] == "reminder" and hook["text"].startswith("<hook_context>")
        assert "the ledger stays in PostgreSQL" in hook["text"]
        assert "scaffold" not in typed and typed["text"] == said
        assert hook["text"] + typed["text"] == message.metadata["native"]["content"][0]["text"]
    assert turn_1.meta["title"] == PROMPT_1


def test_recall_after_the_first_prompt_is_a_marked_part_and_survives_a_resume():
    session = full(AFTER)
    prompts = [m for m in session.messages if m.role == "user" and "scaffold" not in m.metadata]
    first, second = prompts
    typed, hook = (part.model_dump() for part in first.content)
    assert typed == {"type": "text", "text": PROMPT_1}
    assert hook["scaffold"] == "reminder" and "the ledger stays in PostgreSQL" in hook["text"]
    assert second.content == PROMPT_2  # the recall comes with a session's first prompt only
    assert session.meta["title"] == PROMPT_1


def test_the_recall_hook_adds_to_the_first_prompt_only(tmp_path):
    agent = get("gemini")
    start = chat(tmp_path, LINES[:2])  # header and setup turn: what Gemini has written at BeforeAgent
    payload = {"hook_event_name": "BeforeAgent", "transcript_path": str(start)}
    assert agent.recall_wanted(payload)
    assert not agent.recall_wanted(payload | {"hook_event_name": "SessionStart"})
    assert not agent.recall_wanted(payload | {"transcript_path": str(AFTER)})
    assert not agent.recall_wanted(payload | {"transcript_path": str(RECORDED)})  # prompt behind a SessionStart block
    assert not agent.recall_wanted(payload | {"transcript_path": str(tmp_path / "chats" / "gone.jsonl")})
    assert not agent.recall_wanted(payload | {"transcript_path": "/etc/passwd"})


def test_gemini_drops_a_hook_context_prompt_when_it_resumes():
    """0.61 leaves user records that start with <hook_context> out of the history it reloads on
    `--resume` (`isIgnoredUserContent`) and out of the list it writes back: after the resume the
    file no longer holds the first prompt. Capture stored it before (see the incremental tests)."""
    texts = [m.content[-1].text for m in full(RECORDED).messages if m.role == "user" and isinstance(m.content, list)]
    assert texts == [PROMPT_2]


def test_notices_are_scaffolding_but_errors_are_not(tmp_path):
    notices = [{"id": f"n-{kind}", "timestamp": "2026-12-04T17:31:50.000Z", "type": kind, "content": f"a {kind}"}
               for kind in ("info", "warning", "error")]
    path = chat(tmp_path, LINES + [json.dumps(n) + "\n" for n in notices])
    marks = {m.content: m.metadata.get("scaffold") for m in full(path).messages if m.role == "system"}
    assert marks == {"a info": "other", "a warning": "other", "a error": None}


def test_mcp_calls_carry_server_and_tool():
    calls = [c for m in full(RECORDED).messages for c in m.tool_calls or []]
    assert [c.function.name for c in calls] == ["mcp_mcp-memory_recall"]
    shown = "recall (mcp-memory MCP Server)"
    assert tool_name({"name": "recall", "displayName": shown}) == "mcp_mcp-memory_recall"
    assert tool_name({"name": "mcp-memory__recall", "displayName": shown}) == "mcp_mcp-memory_recall"
    assert tool_name({"name": "mcp_mcp-memory_recall", "displayName": shown}) == "mcp_mcp-memory_recall"
    assert tool_name({"name": "read_file", "displayName": "ReadFile"}) == "read_file"


def test_same_agent_round_trip_keeps_the_scaffolding(tmp_path):
    written = adapter_for("gemini").write(full(RECORDED), tmp_path, WriteOptions())
    text = written.files[0].read_text(encoding="utf-8")
    assert "<session_context>" in text and "<hook_context>" in text


def test_a_relay_into_gemini_carries_no_scaffolding(tmp_path):
    """Even when the scaffolding reaches the writer (it is the core's job to strip it) and the
    messages still carry Gemini's native records, a session of another agent gets none of it."""
    source = full(chat(tmp_path / "source", LINES[:TURN_1]))
    unmarked = source.messages[0].model_copy(update={"metadata": {}})  # a setup turn that lost its mark
    relayed = NeutralSession(agent="claude-code", native_id="relay-1", messages=[unmarked, *source.messages],
                             meta={"title": "relay"})
    written = adapter_for("gemini").write(relayed, tmp_path, WriteOptions())
    records = [json.loads(line) for line in written.files[0].read_text(encoding="utf-8").splitlines()[1:]]
    text = json.dumps(records)
    assert "<session_context>" not in text and "<hook_context>" not in text and "Team notes" not in text
    users = [r["content"] for r in records if r["type"] == "user" and "functionResponse" not in json.dumps(r)]
    assert users == [[{"text": PROMPT_1}]]
    assert {r["id"] for r in records}.isdisjoint({m.metadata["native"]["id"] for m in source.messages
                                                 if "native" in m.metadata})


# -- incremental read ----------------------------------------------------------------------------

def test_turn_by_turn_capture_matches_a_full_read(tmp_path):
    first = chat(tmp_path, LINES[:TURN_1])
    turn_1 = full(first).messages
    sessions, cursor = since(first, None)
    assert [m.payload() for m in sessions[0].messages] == [m.payload() for m in turn_1]
    assert cursor["offset"] == first.stat().st_size
    assert since(first, cursor) == ([], cursor)  # nothing new: nothing read, nothing returned
    both = chat(tmp_path, LINES)  # the same file, after the resumed run
    sessions, _ = since(both, cursor)
    new = sessions[0].messages
    assert [(m.role, m.content if m.role == "assistant" else m.content[-1].text) for m in new] == [
        ("user", PROMPT_2), ("assistant", "Nightly pg_dump, kept for 30 days.")]
    assert sessions[0].meta["title"] == PROMPT_1  # the title found by the first run stays
    stored = [m.append_id for m in turn_1] + [m.append_id for m in new]
    assert len(set(stored)) == len(stored)
    prompt_1 = next(m.append_id for m in turn_1 if m.role == "user" and isinstance(m.content, list))
    assert set(stored) - {m.append_id for m in full(both).messages} == {prompt_1}  # what Gemini dropped


def test_mid_turn_runs_hold_back_the_record_gemini_may_rewrite(tmp_path):
    """One run after every line, as from a mid-turn hook: the message with tool calls is stored
    once, with its calls; then a turn-boundary run finishes the turn."""
    collected: list = []
    cursor = None
    for end in range(1, TURN_1 + 1):
        sessions, cursor = since(chat(tmp_path, LINES[:end]), cursor, settled=False)
        collected += [m for s in sessions for m in s.messages]
    sessions, cursor = since(chat(tmp_path, LINES[:TURN_1]), cursor, settled=True)
    collected += [m for s in sessions for m in s.messages]
    expected = full(chat(tmp_path, LINES[:TURN_1])).messages
    assert [m.payload() for m in collected] == [m.payload() for m in expected]
    assert [c.function.name for m in collected for c in m.tool_calls or []] == ["mcp_mcp-memory_recall"]


def test_capture_target_of_a_mid_turn_hook_is_not_settled(tmp_path):
    path = chat(tmp_path, LINES[:5])  # the model's message before its tool calls are added
    agent = get("gemini")

    def read(event: str) -> list:
        payload = {"hook_event_name": event, "transcript_path": str(path)}
        sessions, _ = agent.capture_target(path=None, session=None, hook=payload, environ={}).read(None)
        return [m.role for s in sessions for m in s.messages]

    assert read("AfterTool") == ["user", "user"]
    assert read("AfterAgent") == ["user", "user", "assistant"]


def test_a_rewind_after_capture_keeps_what_was_stored_and_reads_on(tmp_path):
    path = chat(tmp_path, LINES[:TURN_1])
    first, cursor = since(path, None)
    answer = first[0].messages[-1].metadata["native"]["id"]
    retry = {"id": "retry-1", "timestamp": "2026-12-04T17:32:00.000Z", "type": "gemini", "content": "Retried."}
    path = chat(tmp_path, LINES[:TURN_1] + [json.dumps({"$rewindTo": answer}) + "\n", json.dumps(retry) + "\n"])
    sessions, cursor = since(path, cursor)
    assert [m.content for m in sessions[0].messages] == ["Retried."]
    assert answer not in [record_id for record_id, _ in cursor["live"]] and answer in cursor["emitted"]
    assert "retry-1" in [m.metadata["native"]["id"] for m in full(path).messages]  # Gemini's view agrees
    assert since(path, cursor)[0] == []


@pytest.mark.parametrize("change", ["other file", "truncated", "garbage", "bad live list", "bad emitted"])
def test_a_cursor_that_no_longer_fits_starts_over(tmp_path, change):
    path = chat(tmp_path, LINES[:TURN_1])
    _, cursor = since(path, None)
    if change == "other file":
        header = json.loads(LINES[0]) | {"sessionId": "00000000-0000-4000-8000-000000000000"}
        path = chat(tmp_path, [json.dumps(header) + "\n", *LINES[1:TURN_1]])
    elif change == "truncated":
        path = chat(tmp_path, LINES[:3])
    elif change == "garbage":
        cursor = {"v": 1, "offset": "x"}
    elif change == "bad live list":
        cursor["live"] = [["a", 1]]
    else:
        cursor["emitted"] = {"a": None}
    sessions, _ = since(path, cursor)
    assert [m.append_id for m in sessions[0].messages] == [m.append_id for m in full(path).messages]


def test_a_line_still_being_written_waits(tmp_path):
    path = chat(tmp_path, [*LINES[:TURN_1 - 2], LINES[TURN_1 - 2].rstrip("\n")])
    sessions, cursor = since(path, None)
    assert sessions[0].messages[-1].role == "tool"  # the final answer's line has no newline yet
    sessions, _ = since(chat(tmp_path, LINES[:TURN_1]), cursor)
    assert [m.role for m in sessions[0].messages] == ["assistant"]


def test_a_legacy_json_file_is_read_whole():
    legacy = next((FIXTURES / "gemini").glob("ai-sessions.*.json"))
    sessions, cursor = since(legacy, None)
    assert cursor == {} and len(sessions[0].messages) == len(full(legacy).messages)


# -- hooks ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("payload,field", [
    ({"hook_event_name": "AfterAgent"}, "transcript_path must name"),
    ({"hook_event_name": "AfterAgent", "transcript_path": 7}, "transcript_path must name"),
    ({"hook_event_name": "AfterAgent", "transcript_path": "/etc/passwd"}, "must be a Gemini chat file"),
    ({"hook_event_name": "AfterAgent", "transcript_path": "/tmp/chats/x.txt"}, "must be a Gemini chat file"),
])
def test_a_bad_hook_payload_is_refused_by_name(payload, field):
    with pytest.raises(FormatError, match=field):
        get("gemini").capture_target(path=None, session=None, hook=payload, environ={})


def test_recall_output_adds_context_to_the_prompt():
    assert get("gemini").session_start_output("memo") == {
        "hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "memo"}}
