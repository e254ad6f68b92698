"""Kilo Code adapter: the recorded kilo.db and export read through OpenCode's reader as Kilo's, a round
trip keeps every message, and the install document gets fresh ids (no database)."""

from __future__ import annotations

import json

from agent_fixtures import fixtures

from mcp_memory.agents import adapter_for
from mcp_memory.agents.base import WriteOptions
from mcp_memory.agents.kilo.adapter import FRESH_IDS


def test_recorded_sessions_read_as_kilo_and_round_trip(tmp_path):
    adapter = adapter_for("kilo")
    for path in fixtures("kilo"):
        (session,) = adapter.read([path])
        assert session.agent == "kilo" and session.meta["agent_source"] == "kilo"
        assert {m.metadata["agent_source"] for m in session.messages} == {"kilo"}
        assert [m.role for m in session.messages][:3] == ["user", "assistant", "tool"]
        written = adapter.write(session, tmp_path, WriteOptions())
        (back,) = adapter.read(written.files)
        assert [m.payload() for m in back.messages] == [m.payload() for m in session.messages]
        assert written.native_id == session.native_id and "kilo import" in written.resume_command


def test_install_documents_get_fresh_ids_that_keep_their_order(tmp_path):
    adapter = adapter_for("kilo")
    (session,) = adapter.read(fixtures("kilo")[:1])
    plain = json.loads(adapter.write(session, tmp_path / "a", WriteOptions()).files[0].read_text())
    fresh_file = adapter.write(session, tmp_path / "b", WriteOptions(extra={FRESH_IDS: True})).files[0]
    fresh = json.loads(fresh_file.read_text())
    old_ids = [m["info"]["id"] for m in plain["messages"]]
    new_ids = [m["info"]["id"] for m in fresh["messages"]]
    assert fresh["info"]["id"] != plain["info"]["id"] and not set(old_ids) & set(new_ids)
    assert [i[:16] for i in new_ids] == [i[:16] for i in old_ids] and new_ids == sorted(new_ids)
    parts = [p for m in fresh["messages"] for p in m["parts"]]
    assert {p["messageID"] for p in parts} <= set(new_ids) and {p["sessionID"] for p in parts} == {fresh["info"]["id"]}
    (back,) = adapter.read([fresh_file])
    assert [m.content for m in back.messages] == [m.content for m in session.messages]
