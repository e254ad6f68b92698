"""Claude Code adapter: reading real transcripts, writing resumable ones, lossless round trips."""

from __future__ import annotations

import json
import shlex
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import NeutralSession, WriteOptions, adapter_for
from mcp_memory.schema import MessageIn

OLD = FIXTURES / "claude-code"
REAL = FIXTURES / "real" / "claude-code"

EN = "7f067304-bc03-4ecd-8ff1-a312615dda64"
SUB = "1a57e303-c8e7-409a-b31f-077b6c37647f"


def fixture_files() -> list[Path]:
    if not OLD.is_dir():
        return []
    files = sorted(OLD.glob("*.jsonl"))
    return files + sorted(p for p in REAL.rglob("*.jsonl") if "subagents" not in p.parts)


def real(name: str) -> Path:
    return next(REAL.rglob(f"{name}.jsonl"))


@pytest.fixture(scope="module")
def adapter():
    return adapter_for("claude-code")


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main_session(sessions: list[NeutralSession]) -> NeutralSession:
    return next(s for s in sessions if s.parent_native_id is None)


# -- read --------------------------------------------------------------------------------------------


def test_real_session_rebuilds_api_messages_and_pairs_tools(adapter) -> None:
    session = main_session(adapter.read([real(EN)]))
    assert session.native_id == EN
    assert [m.role for m in session.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    first_answer = session.messages[1]
    assert first_answer.content == "I'll look at the design notes first."  # 3 lines, one message.id
    assert first_answer.thinking.signature.startswith("ZmFrZS1zaWduYXR1cmUt")
    assert [c.function.name for c in first_answer.tool_calls] == ["Read"]
    assert json.loads(first_answer.tool_calls[0].function.arguments)["file_path"].endswith("design-notes.md")
    result = session.messages[2]
    assert result.tool_call_id == first_answer.tool_calls[0].id and result.name == "Read"
    assert "Peak load: about 200 QPS" in result.content
    assert len(first_answer.metadata["native"]["lines"]) == 3
    assert first_answer.metadata["model"] == "claude-opus-5-5"
    assert session.messages[-1].content.startswith("Decision: no Redis cache")
    assert session.meta["cwd"] == "/tmp/realgen-runs/claude-en/work"
    assert session.meta["created_at"].startswith("2026-11-30T00:33:59")
    assert session.messages[0].created_at.isoformat().startswith("2026-11-30T00:33:59.545")


def test_every_line_is_accounted_for(adapter) -> None:
    session = main_session(adapter.read([real(EN)]))
    transformed = session.report.transformed
    for kind in ("attachment/prompt_snapshot", "atis-latch", "api-request", "api-request-blob", "tools-used",
                 "queue-operation", "last-prompt", "cost-state", "mode"):  # fmt: skip
        assert transformed[f"{kind} line kept as native only"] >= 1, kind
    kept = sum(len(m.metadata["native"].get("lines", [])) + len(m.metadata["native"].get("before", []))
               for m in session.messages) + len(session.meta["native"]["tail"])  # fmt: skip
    assert kept == len(records(real(EN)))
    assert session.report.lossless


def test_new_style_subagent_file_is_a_linked_child(adapter) -> None:
    sessions = adapter.read([real(SUB)])
    parent = main_session(sessions)
    child = next(s for s in sessions if s.parent_native_id)
    assert child.parent_native_id == SUB == parent.native_id
    call = parent.messages[1].tool_calls[0]
    assert call.function.name == "Agent" and child.parent_tool_call_id == call.id
    assert child.messages[0].content.startswith("[subtask] Read design-notes.md")
    assert child.meta["native"]["agent_meta"]["agentType"] == "general-purpose"
    assert adapter.read([REAL / "sub"])[0].native_id.startswith(SUB)  # folders are searched recursively


def test_old_inline_sidechain_becomes_child(adapter) -> None:
    sessions = adapter.read([OLD / "daaain-claude-code-log_sidechain_integrated.jsonl"])
    parent = main_session(sessions)
    task = parent.messages[0].tool_calls[0]
    assert task.function.name == "Task"
    children = [s for s in sessions if s.parent_native_id == parent.native_id]
    assert children and all(c.parent_tool_call_id == task.id for c in children)
    assert all(
        m.role != "user" or m.metadata.get("kind") for m in parent.messages
    )  # no sidechain text leaked
    assert not any("research how `data-border-color`" in str(m.content) for m in parent.messages)


def test_compaction_is_kept_and_marked(adapter) -> None:
    session = main_session(adapter.read([OLD / "entireio-cli_a6-e4c2a0fbd1-0_compaction-excerpt.jsonl"]))
    summaries = [m for m in session.messages if m.metadata.get("kind") == "compact_summary"]
    assert len(summaries) == 1
    assert summaries[0].metadata["compaction"] == {"boundary_uuid": "2698f93f-93a5-40da-819d-287f5b38e7c1",
                                                    "trigger": "auto", "pre_tokens": 155250}  # fmt: skip
    assert session.messages.index(summaries[0]) > 0  # history before the boundary is kept (logicalParentUuid)
    assert any("truncated" in note for note in session.report.notes)


def test_progress_sibling_does_not_break_chain(adapter) -> None:
    session = main_session(adapter.read([OLD / "entireio-cli_9f-e3cfdef74d-0.jsonl"]))
    assert [m.role for m in session.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert session.report.transformed["progress/hook_progress line kept as native only"] == 9


def test_images_redacted_thinking_unknown_types_and_bad_lines(adapter, tmp_path: Path) -> None:
    base = {"isSidechain": False, "sessionId": "0b4c4b0e-3c1a-4c7e-9d2b-3b6c7f0b5a11", "cwd": "/w"}
    lines = [
        {**base, "type": "user", "uuid": "u1", "parentUuid": None, "timestamp": "2026-01-01T00:00:00.000Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                     {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}}]}},
        {"type": "brand-new-record", "x": 1},
        {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "timestamp": "2026-01-01T00:00:01.000Z",
         "message": {"id": "msg_1", "role": "assistant", "model": "claude-x",
                     "content": [{"type": "redacted_thinking", "data": "EncryptedBlob=="}]}},
        {**base, "type": "assistant", "uuid": "a2", "parentUuid": "a1", "timestamp": "2026-01-01T00:00:02.000Z",
         "message": {"id": "msg_1", "role": "assistant", "model": "claude-x", "content": [{"type": "text", "text": "A cat."}]}},
    ]  # fmt: skip
    path = tmp_path / "0b4c4b0e-3c1a-4c7e-9d2b-3b6c7f0b5a11.jsonl"
    path.write_text(
        "\n".join(json.dumps(x) for x in lines[:2])
        + "\n{not json\n"
        + "\n".join(json.dumps(x) for x in lines[2:])
    )
    session = main_session(adapter.read([tmp_path]))
    user, answer = session.messages
    assert user.content[1].model_dump() == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0K"},
    }
    assert answer.thinking.encrypted and answer.thinking.content == "EncryptedBlob=="
    assert answer.content == "A cat." and answer.append_id == "a1"
    assert session.report.transformed["unknown line type 'brand-new-record' kept as native only"] == 1
    assert session.report.dropped["unparseable line (not a JSON object)"] == 1


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name[:40])
def test_every_message_validates_and_append_ids_are_stable(adapter, path: Path) -> None:
    first = adapter.read([path])
    again = adapter.read([path])
    for one, two in zip(first, again, strict=True):
        ids = [m.append_id for m in one.messages]
        assert ids == [m.append_id for m in two.messages]
        assert len(set(ids)) == len(ids) and all(ids)
        for message in one.messages:
            MessageIn.model_validate(message.payload())
            assert message.metadata["agent_source"] == "claude-code"


# -- lossless round trip ---------------------------------------------------------------------------


def normalized(session: NeutralSession, dangling: set[str]) -> list[dict[str, Any]]:
    """Payloads with the documented write changes undone: entrypoint → cli, a dangling root parent."""
    out = json.loads(json.dumps([m.payload() for m in session.messages]))
    for payload in out:
        native = payload["metadata"].get("native", {})
        for record in native.get("lines", []) + native.get("before", []):
            record.pop("entrypoint", None)
            if record.get("parentUuid") in dangling:
                record["parentUuid"] = None
    return out


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name[:40])
def test_round_trip_is_lossless(adapter, path: Path, tmp_path: Path) -> None:
    sessions = adapter.read([path])
    for session in sessions:
        original_lines = [r for m in session.messages for r in m.metadata["native"].get("lines", [])]
        every = [
            r for m in session.messages for k in ("lines", "before") for r in m.metadata["native"].get(k, [])
        ]
        known = {r.get("uuid") for r in every}
        dangling = {r.get("parentUuid") for r in every if r.get("parentUuid") not in known} - {None}
        options = WriteOptions(cwd=Path(session.meta["cwd"]))
        written = adapter.write(session, tmp_path / "one", options)
        back = next(s for s in adapter.read([written.files[0]]) if s.native_id == session.native_id)
        assert normalized(back, set()) == normalized(session, dangling)
        for key in ("cwd", "model", "created_at"):
            assert back.meta.get(key) == session.meta.get(key)
        # the chain lines themselves, field by field (key order aside)
        on_chain = [r for r in records(written.files[0]) if r.get("type") in ("user", "assistant")]
        assert len(on_chain) == len(original_lines)
        for mine, theirs in zip(on_chain, original_lines, strict=True):
            expected = {**theirs, "entrypoint": "cli"} if "entrypoint" in theirs else dict(theirs)
            if expected.get("parentUuid") in dangling:
                expected["parentUuid"] = None
            assert mine == expected
        # and a second round trip changes nothing at all
        again = adapter.write(back, tmp_path / "two", options)
        assert again.files[0].read_bytes() == written.files[0].read_bytes()


def test_written_file_is_resumable_shape(adapter, tmp_path: Path) -> None:
    session = main_session(adapter.read([real(EN)]))
    written = adapter.write(session, tmp_path, WriteOptions(cwd=Path("/tmp/target project")))
    lines = records(written.files[0])
    chain = [r for r in lines if r.get("type") in ("user", "assistant")]
    assert all(r["cwd"] == "/tmp/target project" and r["entrypoint"] == "cli" for r in chain)
    assert_linear(lines)
    assert lines[-1] == {
        "type": "custom-title",
        "customTitle": session.messages[0].content[:80].strip(),
        "sessionId": EN,
    }
    assert shlex.split(written.resume_command) == ["cd", "/tmp/target project", "&&", "claude", "--resume", EN]
    assert written.report.transformed["cwd set to the target project directory"] > 0


def assert_linear(lines: list[dict[str, Any]]) -> None:
    """Message lines form one chain: each one's ancestors reach the previous message line; times in order."""
    by_uuid = {r["uuid"]: r for r in lines if r.get("uuid")}
    assert len(by_uuid) == len([r for r in lines if r.get("uuid")])
    messages = [r for r in lines if r.get("type") in ("user", "assistant")]
    for previous, current in pairwise(messages):
        node, seen = current, set()
        while node is not None and node["uuid"] != previous["uuid"] and node["uuid"] not in seen:
            seen.add(node["uuid"])
            node = by_uuid.get(node.get("parentUuid") or node.get("logicalParentUuid"))
        assert node is not None and node["uuid"] == previous["uuid"]
        assert current["timestamp"] >= previous["timestamp"]
