"""Codex scaffolding marked (never dropped), MCP call names, incremental reads and foreign writes,
on rollouts written by Codex CLI 0.169.0 (tests/fixtures/codex/cli-0.169.0, tests/fixtures/real/codex)
and the older layouts in tests/fixtures/codex."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import NeutralSession, WriteOptions, adapter_for
from mcp_memory.schema import MessageIn

RECORDED = FIXTURES / "codex" / "cli-0.169.0"
HOOK_RUN = RECORDED / "rollout-2026-12-04T17-24-24-01a24215-f4e9-7652-835d-55f5b4eb2eca.jsonl"
MCP_RUN = RECORDED / "rollout-2026-12-04T17-25-01-01a24216-84f3-7670-a06e-030d90d19b5b.jsonl"
REAL = next((FIXTURES / "real" / "codex" / "en" / "sessions").rglob("rollout-*.jsonl"))
SYNTHETIC = next((FIXTURES / "codex").glob("*.SYNTHETIC.jsonl"))


def read(path: Path) -> NeutralSession:
    (session,) = adapter_for("codex").read([path])
    return session


def scaffold_of(session: NeutralSession) -> list[tuple[str, str | None, str]]:
    return [(m.role, m.metadata.get("scaffold"), _text(m)[:20]) for m in session.messages
            if m.role in ("user", "system")]


def _text(message: MessageIn) -> str:
    if isinstance(message.content, str):
        return message.content
    return " ".join(getattr(p, "text", "") or "" for p in message.content or [])


def test_injected_messages_of_a_recorded_session_are_marked() -> None:
    session = read(HOOK_RUN)
    assert scaffold_of(session) == [
        ("system", "skills", "<skills_instructions"),
        ("user", "environment", "<environment_context"),
        ("system", "other", "ZEBRA-RECALL-CONTEXT"),  # a SessionStart hook's additionalContext
        ("user", None, "Say hello."),
    ]
    assert session.meta["title"] == "Say hello."
    answer = session.messages[-1]
    assert answer.role == "assistant" and answer.content == "Hello there." and "scaffold" not in answer.metadata


def test_real_fixture_marks_context_not_prompts() -> None:
    marked = scaffold_of(read(REAL))
    prompts = [text for role, kind, text in marked if kind is None]
    assert prompts == ["Our order module pea", "What about adding a "]
    assert [kind for _, kind, _ in marked if kind] == ["skills", "environment"]


def test_rollouts_without_kinds_are_marked_from_their_tags() -> None:
    marked = scaffold_of(read(SYNTHETIC))
    assert [(role, kind) for role, kind, _ in marked] == [
        ("system", "permissions"), ("user", "environment"), ("user", None)]


def test_mixed_message_marks_only_its_injected_part(tmp_path: Path) -> None:
    item = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "<user_instructions>be brief</user_instructions>"},
        {"type": "input_text", "text": "Fix the parser."}]}
    path = tmp_path / "rollout-2026-01-01T00-00-00-0198a5c2-3f10-7b21-9c4e-5d2f8a7b6c02.jsonl"
    path.write_text(json.dumps({"timestamp": "2026-01-01T00:00:00.000Z", "type": "response_item",
                                "payload": item}) + "\n")
    (message,) = read(path).messages
    assert "scaffold" not in message.metadata
    assert [p.model_dump().get("scaffold") for p in message.content] == ["instructions", None]


def test_mcp_calls_carry_namespace_and_tool() -> None:
    names = [c.function.name for m in read(MCP_RUN).messages for c in m.tool_calls or []]
    assert names == ["mcp__mcp_memory__create_session", "mcp__mcp_memory__append_message",
                     "mcp__mcp_memory__search_messages", "mcp__mcp_memory__record_decision",
                     "mcp__mcp_memory__recall"]


def test_round_trip_keeps_scaffolding_line_for_line(tmp_path: Path) -> None:
    for path in (HOOK_RUN, MCP_RUN):
        written = adapter_for("codex").write(read(path), tmp_path, WriteOptions())
        assert written.files[0].read_text() == path.read_text()


def test_foreign_session_writes_no_scaffolding_and_no_native_lines(tmp_path: Path) -> None:
    """Messages of another agent's session are rendered anew, even when their metadata holds Codex
    lines (a session once relayed from Codex), and its scaffolding is never written as a turn."""
    codex = read(HOOK_RUN)
    foreign = NeutralSession(agent="claude-code", native_id="c0ffee", meta={"cwd": "/w"}, messages=[
        *codex.messages,
        MessageIn(role="user", content="<system-reminder>x</system-reminder>", metadata={"scaffold": "reminder"}),
        MessageIn(role="user", content=[{"type": "text", "text": "caveat", "scaffold": "caveat"},
                                        {"type": "text", "text": "Real question?"}]),
    ])
    written = adapter_for("codex").write(foreign, tmp_path, WriteOptions())
    text = written.files[0].read_text()
    assert "ZEBRA-RECALL-CONTEXT" not in text and "<environment_context>" not in text
    assert "skills_instructions" not in text and "system-reminder" not in text and "caveat" not in text
    assert "Say hello." in text and "Hello there." in text and "Real question?" in text
    assert "01a24215-f4e9" not in text  # no native line of the Codex session was replayed


def test_incremental_read_adds_only_what_is_new(tmp_path: Path) -> None:
    """Read in three steps while the file grows (the last step starting mid-line): the same messages,
    append_ids and meta as one full read, none twice."""
    raw = MCP_RUN.read_bytes()
    path = tmp_path / MCP_RUN.name
    full = read(MCP_RUN)
    cuts = [raw.index(b'"type":"function_call"'), len(raw) // 2 + 17, len(raw)]
    adapter = adapter_for("codex")
    cursor = None
    seen: list[str] = []
    for cut in cuts:
        path.write_bytes(raw[:cut])
        (session,), cursor = adapter.read_incremental(path, cursor)
        assert session.native_id == full.native_id and session.meta["cwd"] == full.meta["cwd"]
        seen += [m.append_id for m in session.messages]
    assert seen == [m.append_id for m in full.messages]
    again, _ = adapter.read_incremental(path, cursor)
    assert again[0].messages == []


def test_incremental_messages_keep_their_native_lines(tmp_path: Path) -> None:
    """The context lines before a message travel with it even when they were read by an earlier run."""
    raw = HOOK_RUN.read_bytes().splitlines(keepends=True)
    path = tmp_path / HOOK_RUN.name
    path.write_bytes(b"".join(raw[:-4]))  # up to the two item_completed lines before the answer
    (first,), cursor = adapter_for("codex").read_incremental(path, None)
    path.write_bytes(b"".join(raw))
    (second,), _ = adapter_for("codex").read_incremental(path, cursor)
    full = read(HOOK_RUN)
    assert [m.model_dump() for m in first.messages + second.messages] == [m.model_dump() for m in full.messages]
    assert "trailing" not in first.meta["native"] and len(second.messages) == 1
    assert [line["payload"]["type"] for line in second.messages[0].metadata["native_before"]] == [
        "item_completed", "item_completed"]


def test_a_cursor_that_does_not_fit_starts_over(tmp_path: Path) -> None:
    """A cursor of another version, with nonsense values, or past the end of a file that was replaced
    by a shorter one, reads the file from the start: the same ids as a full read, nothing lost."""
    path = tmp_path / HOOK_RUN.name
    path.write_bytes(HOOK_RUN.read_bytes())
    expected = [m.append_id for m in read(HOOK_RUN).messages]
    for cursor in ({"v": 99, "offset": 0, "line": 0}, {"v": 1, "offset": "12", "line": None},
                   {"v": 1, "offset": 10**9, "line": 3, "state": {"seen_keys": "x"}}, "junk"):
        (session,), _ = adapter_for("codex").read_incremental(path, cursor)  # type: ignore[arg-type]
        assert [m.append_id for m in session.messages] == expected


def test_hook_payload_names_the_rollout() -> None:
    from mcp_memory.agents import FormatError, get

    codex = get("codex")
    assert codex.path_from_hook({"hook_event_name": "Stop", "transcript_path": "/r/rollout-x.jsonl"}) == Path(
        "/r/rollout-x.jsonl")
    assert codex.path_from_hook({}) is None
    for bad in ({"hook_event_name": "Stop"}, {"hook_event_name": "Stop", "transcript_path": ["x"]},
                {"hook_event_name": "Stop", "transcript_path": "/etc/passwd"}):
        with pytest.raises(FormatError, match="transcript_path must name a rollout file"):
            codex.path_from_hook(bad)
    assert codex.session_start_output("MEMORY") == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "MEMORY"}}


def test_codex_kinds_map_to_neutral_kinds() -> None:
    from mcp_memory.agents.codex.scaffold import kind_of

    assert [kind_of(k) for k in ("user.text", "user.image", "agents_md.instructions", "memories.instructions",
                                 "permissions.instructions", "host_skills.instructions", "tools.deferred_namespaces",
                                 "hooks.additional_context", "environments.environment_context",
                                 "a_kind.from_a_later_release", None)] == [
        None, None, "instructions", "instructions", "permissions", "skills", "other", "other", "environment",
        "other", None]
