"""OpenAI / DeepSeek chat JSON adapter: read, write, reasoning policies, lossless round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import adapter_for
from mcp_memory.agents.base import NeutralSession, WriteOptions
from mcp_memory.schema import MessageIn

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "openai"
SHARED = FIXTURES / "dsh"
REQUEST = SHARED / "deepseek-api-thinking-toolcall-request.SYNTHETIC.json"
PARTS = HERE / "chat-parts-parallel-tools.json"

adapter = adapter_for("openai")


def _read(path: Path) -> NeutralSession:
    [session] = adapter.read([path])
    return session


def test_reads_the_parts_fixture_into_valid_neutral_messages() -> None:
    session = _read(PARTS)
    roles = [m.role for m in session.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant"]
    user = session.messages[1]
    assert [part.type for part in user.content] == ["text", "image_url"]
    assert user.name == "alex"
    calls = session.messages[2].tool_calls
    assert [c.id for c in calls] == ["call_a", "call_b"]
    assert json.loads(calls[1].function.arguments) == {"path": "b.txt"}
    assert session.messages[2].thinking.content == "Read both files in one step."
    assert session.report.transformed["role developer → system"] == 1
    assert session.report.transformed["tool call arguments given as an object → JSON string"] == 1
    assert session.report.transformed["message field refusal (kept under metadata.native)"] == 1
    assert all(MessageIn.model_validate(m.payload()) for m in session.messages)


def test_append_ids_are_stable_across_reads() -> None:
    first = [m.append_id for m in _read(PARTS).messages]
    assert first == [m.append_id for m in _read(PARTS).messages]
    assert len(set(first)) == len(first)


@pytest.mark.parametrize("path", [PARTS, REQUEST], ids=lambda p: p.name)
def test_round_trip_is_lossless(path: Path, tmp_path: Path) -> None:
    written = adapter.write(_read(path), tmp_path, WriteOptions())
    assert json.loads(written.files[0].read_text()) == json.loads(path.read_text())
    assert written.report.lossless
    again = _read(written.files[0])
    assert [m.payload() for m in again.messages] == [m.payload() for m in _read(path).messages]


def _foreign_session() -> NeutralSession:
    """The parts fixture as if another agent had produced it: no native records."""
    messages = []
    for message in _read(PARTS).messages:
        messages.append(message.model_copy(update={"metadata": {"agent_source": "hermes", "model": "m"}}))
    return NeutralSession(agent="hermes", native_id="x", messages=messages)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("tool-turns", [True, False]), ("all", [True, True]), ("none", [False, False]), (None, [True, False])],
)
def test_reasoning_policy(policy: str | None, expected: list[bool], tmp_path: Path) -> None:
    extra = {} if policy is None else {"reasoning": policy}
    written = adapter.write(_foreign_session(), tmp_path, WriteOptions(extra=extra))
    document = json.loads(written.files[0].read_text())
    assistants = [m for m in document if m["role"] == "assistant"]
    assert ["reasoning_content" in m for m in assistants] == expected
    assert assistants[0]["content"] == ""  # DeepSeek rejects null content
    dropped = sum(count for item, count in written.report.dropped.items() if item.startswith("thinking"))
    assert dropped == expected.count(False)


def test_explicit_policy_applies_to_native_messages_too(tmp_path: Path) -> None:
    written = adapter.write(_read(PARTS), tmp_path, WriteOptions(extra={"reasoning": "none"}))
    document = json.loads(written.files[0].read_text())
    assert not any("reasoning_content" in m for m in document)


def test_unknown_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reasoning must be one of"):
        adapter.write(_read(PARTS), tmp_path, WriteOptions(extra={"reasoning": "some"}))


def test_foreign_write_names_what_it_cannot_carry(tmp_path: Path) -> None:
    session = _foreign_session()
    session.messages[0].metadata["native"] = {"x": 1}
    session.messages[0].metadata["usage"] = {"tokens": 3}
    written = adapter.write(session, tmp_path, WriteOptions())
    assert written.report.dropped["native record of hermes"] == 1
    assert written.report.dropped["metadata.usage"] == 1


def test_folder_and_envelope(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]}
    (tmp_path / "sub" / "req.json").write_text(json.dumps(body))
    [session] = adapter.read([tmp_path])
    assert session.meta["model"] == "deepseek-v4-flash"
    assert session.messages[0].metadata["model"] == "deepseek-v4-flash"
    written = adapter.write(session, tmp_path / "out", WriteOptions())
    assert json.loads(written.files[0].read_text()) == body
