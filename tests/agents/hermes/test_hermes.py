"""HermesAgent adapter: state.db (read-only, by column name) and export JSONL, write, round trip."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from mcp_memory.agents import adapter_for
from mcp_memory.agents.base import NeutralSession, WriteOptions
from mcp_memory.schema import MessageIn

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "hermes"
EXPORT = HERE / "hermes-export.SYNTHETIC.jsonl"
SQL = HERE / "hermes-state-minimal.SYNTHETIC.sql"

adapter = adapter_for("hermes")


@pytest.fixture
def state_db(tmp_path: Path) -> Path:
    path = tmp_path / "home" / "state.db"
    path.parent.mkdir()
    connection = sqlite3.connect(path)
    connection.executescript(SQL.read_text())
    connection.commit()
    connection.close()
    return path


def _payloads(session: NeutralSession) -> list[dict]:
    return [{k: v for k, v in m.payload().items() if k != "metadata"} for m in session.messages]


def test_export_reads_into_an_openai_shaped_transcript() -> None:
    [session] = adapter.read([EXPORT])
    assert session.native_id == "20260815_101500_a1b2c3"
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    call = session.messages[1]
    assert call.tool_calls[0].function.name == "terminal"
    assert call.thinking.content == "The user wants a file listing; run ls first."
    assert session.messages[2].tool_call_id == "call_7f3a1" and session.messages[2].name == "terminal"
    assert session.messages[0].created_at.isoformat() == "2026-08-15T10:15:01+00:00"
    assert session.meta["title"] == "Find repo entry point"
    assert session.meta["cwd"] == "/home/user/demo"
    assert session.meta["created_at"] == "2026-08-15T10:15:00Z"
    assert call.metadata["model"] == "deepseek/deepseek-v4-flash"
    assert session.report.transformed["session column git_branch (kept under native)"] == 1


def test_state_db_reads_like_the_export(state_db: Path) -> None:
    [from_db] = adapter.read([state_db.parent])  # a folder holding state.db
    [from_export] = adapter.read([EXPORT])
    assert _payloads(from_db) == _payloads(from_export)
    assert [m.append_id for m in from_db.messages] == [m.append_id for m in from_export.messages]


def test_state_db_is_opened_read_only(state_db: Path) -> None:
    state_db.chmod(0o444)
    [session] = adapter.read([state_db])
    assert len(session.messages) == 4


def test_newer_columns_json_content_and_compacted_rows(state_db: Path, tmp_path: Path) -> None:
    connection = sqlite3.connect(state_db)
    connection.execute("ALTER TABLE messages ADD COLUMN message_uid TEXT")
    connection.execute("ALTER TABLE messages ADD COLUMN future_column TEXT")
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:,"}}]
    connection.execute(
        "INSERT INTO messages (id, session_id, role, content, timestamp, future_column, message_uid, active, "
        "compacted) VALUES (105, '20260815_101500_a1b2c3', 'user', ?, 1786788910.0, 'x', 'uid-5', 1, 0)",
        ("\x00json:" + json.dumps(parts),),
    )
    connection.execute("UPDATE messages SET active = 0, compacted = 1 WHERE id = 101")
    connection.commit()
    connection.close()
    [session] = adapter.read([state_db])
    assert [m.role for m in session.messages] == ["assistant", "tool", "assistant", "user"]
    assert [p.type for p in session.messages[-1].content] == ["text", "image_url"]
    assert session.report.transformed["message column future_column (kept under native)"] == 1
    assert (
        session.report.transformed[
            "inactive (compacted) message rows (kept under meta.native, not in the transcript)"
        ]
        == 1
    )
    written = adapter.write(session, tmp_path / "out", WriteOptions())
    record = json.loads(written.files[0].read_text())
    assert [row["id"] for row in record["messages"]] == [101, 102, 103, 104, 105]


def test_round_trip_is_lossless(tmp_path: Path) -> None:
    [session] = adapter.read([EXPORT])
    written = adapter.write(session, tmp_path, WriteOptions())
    assert json.loads(written.files[0].read_text()) == json.loads(EXPORT.read_text())
    assert written.report.lossless
    assert any("hermes --resume" in note for note in written.report.notes)
    [again] = adapter.read(written.files)
    assert [m.payload() for m in again.messages] == [m.payload() for m in session.messages]


def test_foreign_session_becomes_an_importable_record(tmp_path: Path) -> None:
    [source] = adapter_for("openai").read(
        [Path(__file__).resolve().parents[2] / "fixtures" / "openai" / "chat-parts-parallel-tools.json"]
    )
    written = adapter.write(source, tmp_path, WriteOptions(cwd=Path("/work/demo")))
    record = json.loads(written.files[0].read_text())
    assert record["source"] == "cli" and record["cwd"] == "/work/demo"
    assert record["id"] == written.native_id and len(record["id"].split("_")[-1]) == 6
    assert record["message_count"] == 6 and record["tool_call_count"] == 2
    tool_rows = [row for row in record["messages"] if row["role"] == "tool"]
    assert [row["tool_name"] for row in tool_rows] == ["read", "read"]
    assert record["messages"][2]["reasoning"] == "Read both files in one step."
    assert all(isinstance(row["timestamp"], float) for row in record["messages"])
    assert written.report.dropped["native record of openai"] == 6
    assert written.report.dropped["message name"] == 1
    again = adapter.write(source, tmp_path / "again", WriteOptions(cwd=Path("/work/demo")))
    assert again.native_id.split("_")[-1] == written.native_id.split("_")[-1]
    [back] = adapter.read(written.files)
    assert [m.role for m in back.messages] == [m.role for m in source.messages]


def test_encrypted_thinking_is_reported(tmp_path: Path) -> None:
    [session] = adapter.read([EXPORT])
    payload = session.messages[1].payload()
    payload.update(thinking={"content": "b64", "encrypted": True}, metadata={"agent_source": "claude-code"})
    message = MessageIn.model_validate(payload)
    foreign = NeutralSession(agent="claude-code", native_id="c", messages=[message])
    written = adapter.write(foreign, tmp_path, WriteOptions())
    assert written.report.dropped["encrypted thinking (Hermes keeps only plain reasoning text)"] == 1
