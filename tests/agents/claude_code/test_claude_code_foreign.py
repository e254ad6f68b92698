"""Claude Code adapter: writing sessions that came from other agents."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import NeutralSession, WriteOptions, adapter_for
from mcp_memory.schema import MessageIn

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def foreign_session() -> NeutralSession:
    def at(seconds: int) -> datetime:
        return T0 + timedelta(seconds=seconds)

    messages = [
        MessageIn(role="system", content="You are a careful reviewer.", created_at=at(0)),
        MessageIn(
            role="user", content=[{"type": "text", "text": "Check orders.py please."}], created_at=at(1)
        ),
        MessageIn(
            role="assistant",
            content="Reading it.",
            thinking={"content": "I should read the file first.", "encrypted": False},
            tool_calls=[
                {"id": "call:1/x", "function": {"name": "read.file", "arguments": '{"path": "orders.py"}'}}
            ],
            created_at=at(2),
            metadata={"agent_source": "codex", "model": "gpt-5"},
        ),
        MessageIn(role="tool", tool_call_id="call:1/x", content="def place(): ...", created_at=at(3)),
        MessageIn(
            role="assistant",
            content="One more look.",
            tool_calls=[{"id": "call_2", "function": {"name": "shell", "arguments": '"ls"'}}],
            created_at=at(1),  # out of order on purpose
        ),
        MessageIn(
            role="user",
            content=[
                {"type": "text", "text": "and this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
            ],
            created_at=at(5),
        ),
        MessageIn(role="assistant", content="Looks fine.", created_at=at(6)),
    ]
    return NeutralSession("codex", "019a-codex-session", messages, {"title": "Review orders", "cwd": "/old"})


@pytest.fixture(scope="module")
def adapter():
    return adapter_for("claude-code")


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_foreign_session_becomes_valid_transcript(adapter, tmp_path: Path) -> None:
    written = adapter.write(foreign_session(), tmp_path, WriteOptions(cwd=Path("/work/proj")))
    lines = lines_of(written.files[0])
    chain = [r for r in lines if r.get("uuid")]
    assert chain[0]["parentUuid"] is None
    assert all(b["parentUuid"] == a["uuid"] for a, b in pairwise(chain))
    assert [r["timestamp"] for r in chain] == sorted(r["timestamp"] for r in chain)
    assert len({r["timestamp"] for r in chain}) == len(chain)
    assert all(r["entrypoint"] == "cli" and r["cwd"] == "/work/proj" for r in chain)
    system, prompt = chain[0], chain[1]
    assert system["isMeta"] is True and prompt["message"]["content"] == "Check orders.py please."
    blocks = [r["message"]["content"][0] for r in chain if r["type"] == "assistant"]
    assert not any(b["type"] == "thinking" for b in blocks)  # no Claude signature: dropped
    uses = [b for b in blocks if b["type"] == "tool_use"]
    assert uses[0]["name"] == "read_file" and uses[0]["id"].startswith("toolu_")
    assert uses[1]["input"] == {"input": "ls"}
    results = [r for r in chain if r["type"] == "user" and isinstance(r["message"]["content"], list)
               and r["message"]["content"][0]["type"] == "tool_result"]  # fmt: skip
    assert [r["message"]["content"][0]["tool_use_id"] for r in results] == [u["id"] for u in uses]
    assert results[1]["message"]["content"][0]["content"] == "(no result was recorded)"
    image = [r for r in chain if r["type"] == "user" and isinstance(r["message"]["content"], list)][-1]
    assert image["message"]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
    }
    assert lines[-1] == {
        "type": "custom-title",
        "customTitle": "Review orders",
        "sessionId": written.native_id,
    }
    report = written.report
    assert report.dropped["reasoning without a Claude signature (a thinking block needs one)"] == 1
    assert report.synthesized["tool_result for a tool call that had no recorded result"] == 1
    assert report.transformed["system message → meta user line (isMeta)"] == 1


def test_thinking_as_text_and_stable_ids(adapter, tmp_path: Path) -> None:
    one = adapter.write(foreign_session(), tmp_path / "a", WriteOptions(cwd=Path("/p"), thinking="text"))
    two = adapter.write(foreign_session(), tmp_path / "b", WriteOptions(cwd=Path("/p"), thinking="text"))
    assert one.native_id == two.native_id
    assert one.files[0].read_bytes() == two.files[0].read_bytes()
    texts = [
        r["message"]["content"][0].get("text", "")
        for r in lines_of(one.files[0])
        if r.get("type") == "assistant"
    ]
    assert "<thinking>\nI should read the file first.\n</thinking>" in texts
    assert one.report.transformed["reasoning without a Claude signature → text block"] == 1


def test_foreign_transcript_reads_back(adapter, tmp_path: Path) -> None:
    written = adapter.write(foreign_session(), tmp_path, WriteOptions(cwd=Path("/p")))
    back = adapter.read([written.files[0]])[0]
    assert back.meta["title"] == "Review orders"
    roles = [m.role for m in back.messages]
    assert roles == ["user", "user", "assistant", "tool", "assistant", "tool", "user", "assistant"]
    assert back.messages[4].tool_calls[0].function.name == "shell"
    assert back.messages[6].content[1].model_dump()["image_url"]["url"] == "data:image/png;base64,iVBORw0K"


def test_changed_claude_message_is_rewritten_from_neutral_fields(adapter, tmp_path: Path) -> None:
    fixtures = FIXTURES / "claude-code"
    session = adapter.read([fixtures / "entireio-cli_c9-883595c929-0.jsonl"])[0]
    session.messages[-1].content = "edited afterwards"
    written = adapter.write(session, tmp_path, WriteOptions(cwd=Path("/p")))
    back = adapter.read([written.files[0]])[0]
    assert back.messages[-1].content == "edited afterwards"
    assert (
        back.messages[-1].thinking.signature == session.messages[-1].thinking.signature
    )  # Claude's own: kept
    assert (
        written.report.transformed[
            "Claude Code message changed since it was read: written from neutral fields"
        ]
        == 1
    )


def test_install_dir_honours_config_dir(adapter) -> None:
    assert adapter.install_dir(Path("/Users/a/my_repo"), {"HOME": "/h"}) == Path(
        "/h/.claude/projects/-Users-a-my-repo"
    )
    env = {"HOME": "/h", "CLAUDE_CONFIG_DIR": "/cfg"}
    assert adapter.install_dir(Path("/x/.local"), env) == Path("/cfg/projects/-x--local")
