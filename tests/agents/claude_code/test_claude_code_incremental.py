"""Claude Code adapter: incremental reads for capture hooks give what a full read gives."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import adapter_for
from mcp_memory.agents.claude_code.adapter import transcript_from_hook

REAL = FIXTURES / "real" / "claude-code"


@pytest.fixture(scope="module")
def adapter():
    return adapter_for("claude-code")


def fixture_lines(name: str) -> list[str]:
    path = next(REAL.rglob(f"{name}*.jsonl"))
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def hook_points(lines: list[str]) -> list[int]:
    """Split points where a hook can fire: never inside one API message (lines sharing message.id)."""
    ids = [(json.loads(line).get("message") or {}).get("id") for line in lines]
    last_of = {mid: i for i, mid in enumerate(ids) if mid}
    first_of = {mid: ids.index(mid) for mid in last_of}
    inside = {i for mid in last_of for i in range(first_of[mid] + 1, last_of[mid] + 1)}
    return [i for i in range(1, len(lines)) if i not in inside]


def payloads(sessions) -> list[dict[str, Any]]:
    return [m.payload() for s in sessions if s.parent_native_id is None for m in s.messages]


@pytest.mark.parametrize("name", ["7f067304", "1a57e303"])
def test_incremental_equals_full_read_at_every_hook_point(adapter, tmp_path: Path, name: str) -> None:
    lines = fixture_lines(name)
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    full = payloads(adapter.read([path]))
    for split in hook_points(lines):
        path.write_text("".join(lines[:split]), encoding="utf-8")
        first, cursor = adapter.read_incremental(path, None)
        json.dumps(cursor)  # the cursor is JSON-able
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(lines[split:]))
        second, _ = adapter.read_incremental(path, json.loads(json.dumps(cursor)))
        assert payloads(first) + payloads(second) == full, split


def big_transcript(copies: int) -> list[str]:
    """The real 2.1.328 session repeated with fresh ids, chained into one long conversation."""
    template = fixture_lines("7f067304")
    records = [json.loads(line) for line in template]
    text = "".join(template)
    ids = {r["uuid"] for r in records if r.get("uuid")}
    ids |= {(r.get("message") or {}).get("id") for r in records} - {None}
    out: list[str] = []
    last_message = None
    for copy in range(copies):
        chunk = text
        for old in ids:
            chunk = chunk.replace(old, str(uuid.uuid5(uuid.NAMESPACE_OID, f"{old}{copy}")))
        for line in chunk.splitlines(keepends=True):
            record = json.loads(line)
            if record.get("uuid") and record.get("parentUuid") is None and last_message:
                record["parentUuid"] = last_message
                line = json.dumps(record) + "\n"
            if record.get("type") in ("user", "assistant"):
                last_message = record["uuid"]
            out.append(line)
    return out


def test_ten_new_lines_read_only_the_new_bytes(adapter, tmp_path: Path) -> None:
    lines = big_transcript(107)  # 47 lines each: about 5,000 lines
    assert len(lines) >= 5000
    split = max(p for p in hook_points(lines) if p <= len(lines) - 10)
    path = tmp_path / "big.jsonl"
    path.write_text("".join(lines[:split]), encoding="utf-8")
    before, cursor = adapter.read_incremental(path, None)
    size_before = path.stat().st_size
    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(lines[split:]))
    after, new_cursor = adapter.read_incremental(path, cursor)
    new_bytes = path.stat().st_size - size_before
    # read = the new bytes + the records after the last message (they belong to the next message)
    unconsumed = size_before - cursor["offset"]
    assert new_cursor["bytes_read"] == new_bytes + unconsumed
    assert unconsumed < 4096 and new_cursor["bytes_read"] < size_before / 100
    assert new_cursor["offset"] <= path.stat().st_size
    assert payloads(before) + payloads(after) == payloads(adapter.read([path]))
    assert payloads(after)  # the new lines did hold messages
    nothing, _ = adapter.read_incremental(path, new_cursor)
    assert payloads(nothing) == []


def test_incremental_subagent_file_is_linked(adapter, tmp_path: Path) -> None:
    path = next(REAL.rglob("agent-*.jsonl"))
    sessions, _ = adapter.read_incremental(path, None)
    assert sessions[0].parent_tool_call_id == "toolu_e09e675b52824bc4a664f46a"


def test_truncated_file_restarts(adapter, tmp_path: Path) -> None:
    lines = fixture_lines("7f067304")
    path = tmp_path / "t.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    _, cursor = adapter.read_incremental(path, None)
    path.write_text("".join(lines[:5]), encoding="utf-8")
    sessions, _ = adapter.read_incremental(path, cursor)
    assert [m.role for m in sessions[0].messages] == ["user"]


def test_transcript_from_hook() -> None:
    common = {"session_id": "abc", "cwd": "/w", "transcript_path": "/h/.claude/projects/-w/abc.jsonl"}
    for event in ("Stop", "PreCompact", "SessionEnd"):
        assert transcript_from_hook({**common, "hook_event_name": event}) == Path(common["transcript_path"])
    sub = {
        **common,
        "hook_event_name": "SubagentStop",
        "agent_transcript_path": "/h/x/abc/subagents/agent-1.jsonl",
    }
    assert transcript_from_hook(sub) == Path("/h/x/abc/subagents/agent-1.jsonl")
    with pytest.raises(ValueError, match="no transcript_path"):
        transcript_from_hook({"hook_event_name": "Stop"})


def test_a_headless_session_without_a_title_record_is_titled_by_its_first_prompt() -> None:
    """`claude -p` writes no ai-title/summary line (the recorded run has none)."""
    path = next(REAL.rglob("7f067304-*.jsonl"))
    kinds = {json.loads(line).get("type") for line in path.read_text().splitlines()}
    assert not kinds & {"ai-title", "custom-title", "summary"}
    (session,) = adapter_for("claude-code").read([path])
    assert session.meta["title"].startswith("Our order module peaks at 200 QPS.")
    assert len(session.meta["title"]) <= 80
