"""Codex CLI adapter: real and published rollouts, lossless round trips, foreign sessions, install."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import adapter_for
from mcp_memory.agents.base import NeutralSession, WriteOptions
from mcp_memory.schema import MessageIn

SHARED = FIXTURES
REAL = SHARED / "real" / "codex" / "en" / "sessions"
FIXTURES = sorted((SHARED / "codex").glob("*.jsonl")) + sorted(REAL.rglob("*.jsonl"))


@pytest.fixture
def adapter():
    return adapter_for("codex")


def payloads(session: NeutralSession) -> list[dict]:
    return [message.payload() for message in session.messages]


def foreign_session() -> NeutralSession:
    when = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    read_args = json.dumps({"file_path": "notes.md"})
    messages = [
        MessageIn(role="system", content="Be brief.", created_at=when),
        MessageIn(role="user", content="Is 200 QPS too much for one Postgres?", created_at=when),
        MessageIn(
            role="assistant",
            content="Let me check the notes.",
            thinking={"content": "Need the load numbers."},
            tool_calls=[{"id": "toolu_1", "function": {"name": "Read", "arguments": read_args}}],
            created_at=when,
        ),
        MessageIn(role="tool", tool_call_id="toolu_1", content="Peak 200 QPS", created_at=when),
        MessageIn(role="assistant", content="No queue needed.", created_at=when),
    ]
    return NeutralSession(
        agent="claude-code", native_id="abc-123", messages=messages, meta={"cwd": "/srv/app"}
    )


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_round_trip_is_lossless(adapter, path, tmp_path):
    (first,) = adapter.read([path])
    written = adapter.write(first, tmp_path, WriteOptions())
    (second,) = adapter.read(written.files)
    assert payloads(second) == payloads(first)
    assert second.meta == first.meta
    assert second.native_id == first.native_id
    assert first.report.lossless and written.report.lossless


def test_real_rollout_is_rewritten_line_for_line(adapter, tmp_path):
    (path,) = sorted(REAL.rglob("*.jsonl"))
    (session,) = adapter.read([path])
    written = adapter.write(session, tmp_path, WriteOptions())
    assert written.files[0].name == path.name
    original = [json.loads(line) for line in path.read_text().splitlines()]
    assert [json.loads(line) for line in written.files[0].read_text().splitlines()] == original


def test_real_rollout_transcript(adapter):
    (session,) = adapter.read([REAL])
    roles = [m.role for m in session.messages]
    assert session.native_id == "01a229df-bc39-7cf2-a3b8-f020d8db9c62"
    assert roles.count("tool") == 2 and roles.count("user") == 3 and roles[0] == "system"
    calls = {c.id: c for m in session.messages for c in m.tool_calls or []}
    outputs = {m.tool_call_id for m in session.messages if m.role == "tool"}
    assert set(calls) == outputs
    assert (
        json.loads(calls["call_3ec0caeb5ed4425484879bb0"].function.arguments)["cmd"] == "cat design-notes.md"
    )
    thinking = [m.thinking.content for m in session.messages if m.thinking]
    assert len(thinking) == 3 and thinking[0].startswith("The user asks whether")
    assert session.meta["cwd"] == "/tmp/realgen-runs/codex-en/work"
    assert session.meta["model"] == "gpt-5.5" and session.meta["title"].startswith("Our order module")
    assert all(m.created_at is not None and m.metadata["agent_source"] == "codex" for m in session.messages)
    # every event_msg is accounted for: 21 lines, all kept verbatim (none dropped)
    kept = {k: v for k, v in session.report.transformed.items() if k.startswith("line type event_msg")}
    assert sum(kept.values()) == 21 and not session.report.dropped


def test_append_ids_are_deterministic_and_unique(adapter):
    (first,) = adapter.read([REAL])
    (second,) = adapter.read([REAL])
    ids = [m.append_id for m in first.messages]
    assert ids == [m.append_id for m in second.messages]
    assert len(set(ids)) == len(ids)


def test_legacy_format_and_encrypted_reasoning(adapter):
    (session,) = adapter.read([SHARED / "codex" / "ai-sessions.codex-older-format.jsonl"])
    assert session.native_id == "test-session-789"
    assert [m.role for m in session.messages] == ["user", "assistant", "assistant", "assistant", "tool"]
    reasoning = session.messages[1]
    assert reasoning.thinking.content == "Planning to create README"
    assert reasoning.metadata["native"]["encrypted_content"] == "encrypted_data_here"
    assert (
        session.report.transformed[
            "line type record_type:state → kept verbatim in metadata.native_before (not transcript)"
        ]
        == 3
    )


def test_encrypted_only_reasoning_becomes_encrypted_thinking(adapter, tmp_path):
    lines = [
        {
            "timestamp": "2026-01-01T00:00:00.000Z",
            "type": "session_meta",
            "payload": {"id": "0198a5c2-3f10-7b21-9c4e-5d2f8a7b6c02", "cwd": "/w"},
        },
        {
            "timestamp": "2026-01-01T00:00:01.000Z",
            "type": "response_item",
            "payload": {"type": "reasoning", "summary": [], "encrypted_content": "gAAA=="},
        },
        {
            "timestamp": "2026-01-01T00:00:02.000Z",
            "type": "response_item",
            "payload": {
                "type": "custom_tool_call",
                "call_id": "c1",
                "name": "apply_patch",
                "input": "*** Begin Patch",
            },
        },
        {
            "timestamp": "2026-01-01T00:00:03.000Z",
            "type": "response_item",
            "payload": {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"},
        },
        {
            "timestamp": "2026-01-01T00:00:04.000Z",
            "type": "response_item",
            "payload": {"type": "web_search_call", "status": "completed"},
        },
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    (session,) = adapter.read([path])
    thinking = session.messages[0].thinking
    assert thinking.encrypted and thinking.content == "gAAA=="
    call = session.messages[1].tool_calls[0]
    assert call.function.name == "apply_patch" and json.loads(call.function.arguments) == {
        "input": "*** Begin Patch"
    }
    assert session.messages[2].role == "tool" and session.messages[2].content == "Done"
    assert session.meta["native"]["trailing"][0]["payload"]["type"] == "web_search_call"
    assert session.report.dropped["undecodable JSON line"] == 1


def test_foreign_session_keeps_texts_and_call_pairs(adapter, tmp_path):
    source = foreign_session()
    written = adapter.write(source, tmp_path, WriteOptions(thinking="text", cwd=Path("/srv/app")))
    (session,) = adapter.read(written.files)
    texts = [m.content for m in session.messages if isinstance(m.content, str)]
    assert texts == [
        "Be brief.",
        "Is 200 QPS too much for one Postgres?",
        "Let me check the notes.",
        "Peak 200 QPS",
        "No queue needed.",
    ]
    calls = [
        (c.id, c.function.name, c.function.arguments) for m in session.messages for c in m.tool_calls or []
    ]
    assert calls == [("toolu_1", "Read", json.dumps({"file_path": "notes.md"}))]
    assert [m.tool_call_id for m in session.messages if m.role == "tool"] == ["toolu_1"]
    assert [m.thinking.content for m in session.messages if m.thinking] == ["Need the load numbers."]
    assert session.meta["cwd"] == "/srv/app" and session.meta["source"] == "cli"
    assert written.report.synthesized["session_meta line"] == 1
    assert shlex.split(written.resume_command) == ["cd", "/srv/app", "&&", "codex", "resume", written.native_id]
    name = written.files[0].name
    assert name.startswith("rollout-") and name.endswith(f"-{written.native_id}.jsonl")
    again = adapter.write(source, tmp_path / "again", WriteOptions(thinking="text"))
    assert again.native_id == written.native_id  # the thread id is derived, not random


def test_thinking_policy_drop_is_reported(adapter, tmp_path):
    written = adapter.write(foreign_session(), tmp_path, WriteOptions())
    (session,) = adapter.read(written.files)
    assert not any(m.thinking for m in session.messages)
    assert written.report.dropped["thinking (thinking policy: drop)"] == 1


def test_install_honours_codex_home(adapter, tmp_path):
    home = tmp_path / "codex-home"
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(home)}
    assert adapter.install_dir(tmp_path, env) == home / "sessions"
    assert adapter.install_dir(tmp_path, {"HOME": "/h"}) == Path("/h/.codex/sessions")
    written = adapter.install(foreign_session(), cwd=tmp_path / "proj", env=env, options=WriteOptions())
    path = written.files[0]
    assert path.parent.parent.parent.parent == home / "sessions"
    header = json.loads(path.read_text().splitlines()[0])
    assert header["type"] == "session_meta" and header["payload"]["cwd"] == str(tmp_path / "proj")
    assert header["payload"]["id"] == written.native_id
