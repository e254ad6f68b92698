"""OpenCode capture: incremental reads of opencode.db give exactly what a full read gives, once."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents.opencode.adapter import OpenCodeAdapter, read_session_from_db

REAL = FIXTURES / "real" / "opencode"


def payloads(sessions) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for session in sessions:
        found.setdefault(session.native_id, []).extend(m.payload() for m in session.messages)
    return found


def hide_messages_after(db: Path, keep: int) -> list[tuple]:
    """Remove all but the first `keep` messages (and their parts); return the removed rows."""
    with sqlite3.connect(db) as connection:
        ids = [r[0] for r in connection.execute("SELECT id FROM message ORDER BY time_created, id")][keep:]
        marks = ",".join("?" * len(ids))
        messages = connection.execute(f"SELECT * FROM message WHERE id IN ({marks})", ids).fetchall()
        parts = connection.execute(f"SELECT * FROM part WHERE message_id IN ({marks})", ids).fetchall()
        connection.execute(f"DELETE FROM part WHERE message_id IN ({marks})", ids)
        connection.execute(f"DELETE FROM message WHERE id IN ({marks})", ids)
    return [messages, parts]


def restore(db: Path, rows: list[tuple], bump: int) -> None:
    messages, parts = rows
    with sqlite3.connect(db) as connection:
        for row in messages:
            connection.execute(f"INSERT INTO message VALUES ({','.join('?' * len(row))})", row)
        for row in parts:
            connection.execute(f"INSERT INTO part VALUES ({','.join('?' * len(row))})", row)
        connection.execute("UPDATE part SET time_updated = time_updated + ?", (bump,))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    target = tmp_path / "opencode.db"
    shutil.copy(REAL / "en" / "opencode.db", target)
    return target


def test_first_call_reads_everything_then_nothing(db: Path) -> None:
    adapter = OpenCodeAdapter()
    full = payloads(adapter.read([db]))
    sessions, cursor = adapter.read_incremental(db, None)
    assert payloads(sessions) == full
    json.dumps(cursor)  # JSON-able
    again, cursor_again = adapter.read_incremental(db, cursor)
    assert again == [] and cursor_again == cursor


def test_new_messages_are_read_once_with_the_full_read_append_ids(db: Path) -> None:
    adapter = OpenCodeAdapter()
    full = payloads(adapter.read([db]))
    hidden = hide_messages_after(db, keep=3)
    first, cursor = adapter.read_incremental(db, None)
    restore(db, hidden, bump=10_000)
    second, cursor = adapter.read_incremental(db, cursor)
    (session_id,) = full
    combined = payloads(first)[session_id] + payloads(second)[session_id]
    assert combined == full[session_id]
    assert adapter.read_incremental(db, cursor)[0] == []


def test_an_unfinished_assistant_message_waits(db: Path) -> None:
    adapter = OpenCodeAdapter()
    with sqlite3.connect(db) as connection:
        last_id, data = connection.execute(
            "SELECT id, data FROM message ORDER BY time_created DESC, id DESC"
        ).fetchone()
        unfinished = json.loads(data)
        completed = unfinished["time"].pop("completed")
        connection.execute("UPDATE message SET data = ? WHERE id = ?", (json.dumps(unfinished), last_id))
    first, cursor = adapter.read_incremental(db, None)
    assert last_id not in {m.append_id for s in first for m in s.messages}
    unfinished["time"]["completed"] = completed
    with sqlite3.connect(db) as connection:
        connection.execute(
            "UPDATE message SET data = ?, time_updated = time_updated + 5000 WHERE id = ?",
            (json.dumps(unfinished), last_id),
        )
    second, _ = adapter.read_incremental(db, cursor)
    assert next(m.append_id for s in second for m in s.messages) == last_id


def test_read_session_from_db_includes_child_sessions(tmp_path: Path) -> None:
    db = REAL / "sub" / "opencode.db"
    sessions, cursor = read_session_from_db(db, "ses_dd6204ccfffefPZYpkzkq1F4L4", None)
    by_id = {s.native_id: s for s in sessions}
    assert set(by_id) == {"ses_dd6204ccfffefPZYpkzkq1F4L4", "ses_dd62046a9ffeSB79okD2Ss67El"}
    assert by_id["ses_dd62046a9ffeSB79okD2Ss67El"].parent_tool_call_id == "call_d7a0cdb72e0545b3ae4fddf3"
    assert payloads(sessions) == payloads(OpenCodeAdapter().read([db]))
    assert read_session_from_db(db, "ses_dd6204ccfffefPZYpkzkq1F4L4", cursor)[0] == []
