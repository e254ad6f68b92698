"""The neutral schema v1: every rule, and errors that name the field."""

from __future__ import annotations

import json

import pytest

from mcp_memory.errors import Invalid
from mcp_memory.schema import json_schema, parse_message

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"role": "robot"}, "message.role must be one of system, user, assistant, tool"),
        ({"content": "x"}, "message.role"),
        ({"role": "tool", "content": "x"}, "message.tool_call_id is required when role is 'tool'"),
        ({"role": "user", "tool_calls": [CALL]}, "message.tool_calls is only allowed when role is 'assistant'"),
        ({"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "f", "arguments": {"a": 1}}}]},
         "message.tool_calls.0.function.arguments"),
        ({"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "{nope"}}]},
         "message.tool_calls.0.function.arguments must be a JSON-encoded string"),
        ({"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
         "message.tool_calls.0.id"),
        ({"role": "user", "content": 5}, "message.content"),
        ({"role": "user", "content": [{"type": "text"}]}, "message.content.0 a part of type 'text' needs a string"),
        ({"role": "user", "content": [{"text": "no type"}]}, "message.content.0.type"),
        ({"role": "assistant", "thinking": {"content": "x", "encrypted": "maybe"}}, "message.thinking.encrypted"),
        ({"role": "user", "created_at": "yesterday"}, "message.created_at"),
        ({"role": "user", "created_at": "2026-01-01T00:00:00"}, "message.created_at must carry a time zone"),
        ({"role": "user", "schema_version": 2}, "message.schema_version"),
        ({"role": "user", "surprise": 1}, "message.surprise is not a field of the neutral message"),
        ({"role": "user", "metadata": []}, "message.metadata"),
        ({"role": "user", "append_id": ""}, "message.append_id"),
        ("just text", "message must be a JSON object"),
    ],
)
def test_rejections_name_the_field(raw, expected) -> None:
    with pytest.raises(Invalid) as info:
        parse_message(raw)
    assert expected in str(info.value)
    assert info.value.render().startswith("[invalid] ")


def test_size_limit_names_the_largest_field() -> None:
    with pytest.raises(Invalid, match=r"message\.metadata makes the message \d+ bytes, over the limit of 2048"):
        parse_message({"role": "user", "content": "x", "metadata": {"blob": "y" * 4000}}, max_bytes=2048)


def test_accepts_the_seed_examples() -> None:
    assistant = parse_message({
        "schema_version": 1, "session_id": "ses_x", "seq": 1024, "role": "assistant",
        "content": "我先读取配置文件再继续。", "tool_calls": [CALL],
        "thinking": {"content": "……", "encrypted": False}, "created_at": "2026-08-18T07:00:00Z",
        "metadata": {"project": "p", "agent_source": "hermes", "model": "m"},
    })
    payload = assistant.payload()
    assert "session_id" not in payload and "seq" not in payload  # server-assigned
    assert payload["created_at"] == "2026-08-18T07:00:00Z"
    tool = parse_message({"role": "tool", "tool_call_id": "c1", "content": "out", "thinking": None})
    assert tool.thinking is None
    encrypted = parse_message({"role": "assistant", "thinking": {"content": None, "encrypted": True}})
    assert encrypted.thinking.encrypted


def test_times_are_normalised_to_utc() -> None:
    message = parse_message({"role": "user", "created_at": "2026-01-01T08:00:00+08:00"})
    assert message.payload()["created_at"] == "2026-01-01T00:00:00Z"


def test_json_schema_is_valid_json_and_describes_roles() -> None:
    schema = json_schema()
    text = json.dumps(schema)
    assert schema["properties"]["role"]["enum"] == ["system", "user", "assistant", "tool"]
    assert "tool_call_id" in text and "thinking" in text and "append_id" in text
