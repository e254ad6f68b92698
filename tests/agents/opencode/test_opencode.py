"""OpenCode adapter: reading the three 1.x generations, writing `opencode import` JSON, round trips."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import NeutralSession, WriteOptions, adapter_for
from mcp_memory.agents.opencode.adapter import OpenCodeAdapter, default_db_path
from mcp_memory.schema import MessageIn

SYNTHETIC = FIXTURES / "opencode"
REAL = FIXTURES / "real" / "opencode"

SOURCES = [
    SYNTHETIC / "export-v1" / "ses_export.json",
    SYNTHETIC / "legacy-storage" / "storage",
    SYNTHETIC / "legacy-storage",
    SYNTHETIC / "sqlite" / "opencode.db",
    REAL / "en" / "opencode.db",
    REAL / "en" / "export-ses_dd6207bd2ffe78J5O1EUC09xWA.json",
    REAL / "sub" / "opencode.db",
    REAL / "sub" / "export-ses_dd6204ccfffefPZYpkzkq1F4L4.json",
    REAL / "sub" / "export-ses_dd62046a9ffeSB79okD2Ss67El.json",
]


@pytest.fixture
def adapter() -> OpenCodeAdapter:
    return OpenCodeAdapter()


def neutral(sessions: list[NeutralSession]) -> list[tuple[str, list[dict], dict]]:
    return sorted((s.native_id, [m.payload() for m in s.messages], s.meta) for s in sessions)


def test_registry_name() -> None:
    assert isinstance(adapter_for("opencode"), OpenCodeAdapter)
    assert OpenCodeAdapter.display_name == "OpenCode"


def test_three_generations_give_the_same_conversation(adapter: OpenCodeAdapter) -> None:
    export, storage, db = (
        adapter.read([SYNTHETIC / "export-v1" / "ses_export.json"]),
        adapter.read([SYNTHETIC / "legacy-storage"]),
        adapter.read([SYNTHETIC / "sqlite" / "opencode.db"]),
    )
    messages = [[m.payload() for m in s[0].messages] for s in (export, storage, db)]
    assert messages[0] == messages[1] == messages[2]
    assert storage[0].meta["native"]["todos"][0]["content"] == "Fix add()"


@pytest.mark.parametrize("name", ["en", "sub"])
def test_real_database_matches_real_export(adapter: OpenCodeAdapter, name: str) -> None:
    from_db = {s.native_id: s for s in adapter.read([REAL / name / "opencode.db"])}
    exports = sorted((REAL / name).glob("export-*.json"))
    assert exports
    for export in exports:
        (session,) = adapter.read([export])
        assert neutral([session]) == neutral([from_db[session.native_id]])


def test_synthetic_conversation_content(adapter: OpenCodeAdapter) -> None:
    (session,) = adapter.read([SYNTHETIC / "export-v1" / "ses_export.json"])
    roles = [m.role for m in session.messages]
    assert roles == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    user, first, bash, read, edit, last = session.messages
    assert user.content[0].text.startswith("The test in tests/test_utils.py fails")
    assert user.content[1].type == "file" and user.content[1].file["url"].startswith("file://")
    assert user.content[2].synthetic is True
    assert first.thinking.content == "I should run the test first to see the failure."
    assert first.thinking.signature == "EqQBCkYIBxgCKkB...synthetic..."
    assert [c.function.name for c in first.tool_calls] == ["bash", "read", "edit"]
    assert json.loads(first.tool_calls[0].function.arguments)["command"].startswith("python -m pytest")
    assert first.metadata["usage"][0]["tokens"]["total"] == 6294
    assert first.metadata["model"] == "claude-sonnet-4-5" and first.metadata["agent_source"] == "opencode"
    assert bash.tool_call_id == "toolu_01SyntheticBash0001" and "1 failed" in bash.content
    assert read.metadata["is_error"] is True and read.content.startswith("File not found")
    assert edit.content == "Edit applied successfully."
    assert last.content.startswith("Fixed: `add`")
    assert user.append_id == "msg_b76daabe80015bR215DEWc1ZCj" and bash.append_id.startswith("prt_")
    assert user.created_at == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert session.meta["title"] == "Fix failing test in utils"
    assert session.meta["cwd"] == "/home/dev/demo-repo"
    assert session.meta["created_at"] == "2026-01-01T00:00:00Z"
    assert session.report.transformed["part type: patch → metadata.native only"] == 1
    assert session.report.lossless


def test_child_session_is_linked_to_the_task_call(adapter: OpenCodeAdapter) -> None:
    sessions = {s.native_id: s for s in adapter.read([REAL / "sub" / "opencode.db"])}
    child = sessions["ses_dd62046a9ffeSB79okD2Ss67El"]
    assert child.parent_native_id == "ses_dd6204ccfffefPZYpkzkq1F4L4"
    assert child.parent_tool_call_id == "call_d7a0cdb72e0545b3ae4fddf3"
    assert sessions["ses_dd6204ccfffefPZYpkzkq1F4L4"].parent_native_id is None


def test_append_ids_are_stable_across_reads(adapter: OpenCodeAdapter) -> None:
    first = adapter.read([REAL / "en" / "opencode.db"])
    again = adapter.read([REAL / "en" / "opencode.db"])
    ids = [m.append_id for m in first[0].messages]
    assert ids == [m.append_id for m in again[0].messages]
    assert len(set(ids)) == len(ids) == 8


def test_folder_with_database_and_storage_is_deduplicated(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    shutil.copy(SYNTHETIC / "sqlite" / "opencode.db", tmp_path / "opencode.db")
    shutil.copytree(SYNTHETIC / "legacy-storage" / "storage", tmp_path / "storage")
    shutil.copy(REAL / "en" / "export-ses_dd6207bd2ffe78J5O1EUC09xWA.json", tmp_path / "export.json")
    (tmp_path / "notes.json").write_text('{"unrelated": true}')
    sessions = adapter.read([tmp_path])
    assert sorted(s.native_id for s in sessions) == [
        "ses_4892557ffffee71lHFE8l6hlvY",
        "ses_dd6207bd2ffe78J5O1EUC09xWA",
    ]
    by_id = {s.native_id: s for s in sessions}
    assert by_id["ses_4892557ffffee71lHFE8l6hlvY"].source_path == tmp_path / "opencode.db"


def test_opencode_2_export_is_refused(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    v2 = tmp_path / "v2.json"
    v2.write_text(
        json.dumps(
            {
                "info": {"id": "ses_x", "location": {"directory": "/w"}},
                "messages": [{"type": "user", "text": "hi"}],
            }
        )
    )
    with pytest.raises(ValueError, match=r"OpenCode 2\.x"):
        adapter.read([v2])


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_same_agent_round_trip_is_lossless(adapter: OpenCodeAdapter, source: Path, tmp_path: Path) -> None:
    sessions = adapter.read([source])
    assert sessions
    for session in sessions:
        written = adapter.write(session, tmp_path / session.native_id, WriteOptions())
        assert written.report.lossless and not written.report.synthesized
        back = adapter.read(written.files)
        assert neutral(back) == neutral([session])
        document = json.loads(written.files[0].read_text())
        assert document["info"] == session.meta["native"]["info"]


@pytest.mark.parametrize(
    "export",
    [SYNTHETIC / "export-v1" / "ses_export.json", *sorted(REAL.glob("*/export-*.json"))],
    ids=lambda p: p.name,
)
def test_written_file_equals_the_original_export(
    adapter: OpenCodeAdapter, export: Path, tmp_path: Path
) -> None:
    (session,) = adapter.read([export])
    written = adapter.write(session, tmp_path, WriteOptions())
    assert json.loads(written.files[0].read_text()) == json.loads(export.read_text())


def test_snapshots_can_be_dropped(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    (session,) = adapter.read([SYNTHETIC / "export-v1" / "ses_export.json"])
    written = adapter.write(session, tmp_path, WriteOptions(extra={"opencode_drop_snapshots": True}))
    text = written.files[0].read_text()
    assert '"snapshot"' not in text and '"patch"' not in text
    assert written.report.dropped["part type: patch (snapshot hash, meaningless elsewhere)"] == 1


def claude_like_session() -> NeutralSession:
    start = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)

    def at(seconds: int) -> datetime:
        return start + timedelta(seconds=seconds)

    meta = {"agent_source": "claude-code", "model": "claude-sonnet-4-5"}
    messages = [
        MessageIn(
            append_id="u1",
            role="user",
            content="List the files, then read README.md",
            created_at=at(0),
            metadata={"agent_source": "claude-code"},
        ),
        MessageIn(
            append_id="a1",
            role="assistant",
            content="Let me look.",
            created_at=at(1),
            metadata=meta,
            thinking={"content": "List first, then read.", "signature": "sig-abc"},
            tool_calls=[
                {"id": "toolu_1", "function": {"name": "Bash", "arguments": json.dumps({"command": "ls"})}},
                {
                    "id": "toolu_2",
                    "function": {"name": "Read", "arguments": json.dumps({"file_path": "/w/README.md"})},
                },
                {"id": "toolu_3", "function": {"name": "mcp__memory__search", "arguments": "{}"}},
            ],
        ),
        MessageIn(
            append_id="r1",
            role="tool",
            tool_call_id="toolu_1",
            content="README.md\nsrc",
            created_at=at(2),
            metadata={"agent_source": "claude-code"},
        ),
        MessageIn(
            append_id="r2",
            role="tool",
            tool_call_id="toolu_2",
            created_at=at(3),
            content=[{"type": "text", "text": "permission denied"}],
            metadata={"agent_source": "claude-code", "is_error": True},
        ),
        MessageIn(
            append_id="r3",
            role="tool",
            tool_call_id="toolu_3",
            content="[]",
            created_at=at(3),
            metadata={"agent_source": "claude-code"},
        ),
        MessageIn(
            append_id="a2",
            role="assistant",
            content="There is a README and src/.",
            created_at=at(4),
            metadata=meta,
        ),
        MessageIn(append_id="u2", role="user", content="Thanks", created_at=at(5)),
        MessageIn(
            append_id="a3", role="assistant", content="You're welcome.", created_at=at(6), metadata=meta
        ),
    ]
    return NeutralSession(
        agent="claude-code",
        native_id="3f2a-uuid",
        messages=messages,
        meta={"title": "From Claude", "cwd": "/w", "model": "claude-sonnet-4-5"},
    )


def test_cross_agent_session_becomes_a_valid_import_file(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    written = adapter.write(claude_like_session(), tmp_path, WriteOptions())
    document = json.loads(written.files[0].read_text())
    info, messages = document["info"], document["messages"]
    assert info["id"].startswith("ses_") and info["title"] == "From Claude" and info["directory"] == "/w"
    message_ids = [m["info"]["id"] for m in messages]
    part_ids = [p["id"] for m in messages for p in m["parts"]]
    assert message_ids == sorted(message_ids) and len(set(message_ids)) == len(message_ids)
    assert part_ids == sorted(part_ids) and all(len(i.split("_")[1]) == 26 for i in message_ids + part_ids)
    users = [m["info"] for m in messages if m["info"]["role"] == "user"]
    assert all(
        u["agent"] == "build" and u["model"] == {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}
        for u in users
    )
    for message in messages:
        m = message["info"]
        assert all(p["messageID"] == m["id"] and p["sessionID"] == info["id"] for p in message["parts"])
        if m["role"] == "assistant":
            assert m["parentID"] in {u["id"] for u in users}
            assert {"modelID", "providerID", "mode", "agent", "path", "cost", "tokens"} <= set(m)
            assert m["time"]["completed"] >= m["time"]["created"]
    tools = [p for m in messages for p in m["parts"] if p["type"] == "tool"]
    assert [t["tool"] for t in tools] == ["bash", "read", "mcp__memory__search"]
    assert tools[0]["state"] == {
        **tools[0]["state"],
        "status": "completed",
        "input": {"command": "ls"},
        "output": "README.md\nsrc",
    }
    assert tools[1]["state"]["status"] == "error" and tools[1]["state"]["error"] == "permission denied"
    assert tools[1]["state"]["input"] == {"filePath": "/w/README.md"}
    assert "snapshot" not in written.files[0].read_text()
    assert written.report.transformed["tool name Bash → bash"] == 1


def test_cross_agent_content_survives(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    original = claude_like_session()
    written = adapter.write(original, tmp_path, WriteOptions())
    (back,) = adapter.read(written.files)

    def texts(session: NeutralSession, role: str) -> list[str]:
        return [m.content for m in session.messages if m.role == role and isinstance(m.content, str)]

    assert texts(back, "user") == texts(original, "user")
    assert texts(back, "assistant") == texts(original, "assistant")
    calls = [c.id for m in back.messages for c in m.tool_calls or []]
    assert calls == ["toolu_1", "toolu_2", "toolu_3"]
    results = {m.tool_call_id: m.content for m in back.messages if m.role == "tool"}
    assert results == {"toolu_1": "README.md\nsrc", "toolu_2": "permission denied", "toolu_3": "[]"}
    assert [m.thinking.content for m in back.messages if m.thinking] == ["List first, then read."]
    assert [m.created_at for m in back.messages if m.role == "user"] == [
        m.created_at for m in original.messages if m.role == "user"
    ]


def test_writing_twice_gives_the_same_ids(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    one = adapter.write(claude_like_session(), tmp_path / "one", WriteOptions())
    two = adapter.write(claude_like_session(), tmp_path / "two", WriteOptions())
    assert one.files[0].read_text() == two.files[0].read_text()


def test_leading_assistant_and_orphan_result_get_a_parent(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    session = NeutralSession(
        agent="openai",
        native_id="x",
        messages=[
            MessageIn(role="system", content="Be brief."),
            MessageIn(role="assistant", content="Hello."),
            MessageIn(role="tool", tool_call_id="call_9", name="search", content="nothing"),
        ],
    )
    written = adapter.write(session, tmp_path, WriteOptions())
    messages = json.loads(written.files[0].read_text())["messages"]
    assert [m["info"]["role"] for m in messages] == ["user", "assistant", "assistant"]
    assert messages[0]["parts"][0] == {**messages[0]["parts"][0], "synthetic": True, "text": "Be brief."}
    assert (
        messages[2]["parts"][0]["tool"] == "search"
        and messages[2]["parts"][0]["state"]["output"] == "nothing"
    )
    assert written.report.synthesized["assistant message for a tool result without its call"] == 1


def test_install_without_the_binary_leaves_the_file_and_the_command(
    adapter: OpenCodeAdapter, tmp_path: Path
) -> None:
    env = {"PATH": str(tmp_path / "empty"), "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    written = adapter.install(claude_like_session(), cwd=tmp_path / "proj", env=env, options=WriteOptions())
    assert written.files[0].parent == tmp_path / "data" / "opencode" / "mcp-memory-import"
    assert f"opencode import {written.files[0]}" in written.resume_command
    assert written.resume_command.endswith(f"opencode --session {written.native_id}")


def test_default_db_path() -> None:
    assert default_db_path({"XDG_DATA_HOME": "/x", "HOME": "/h"}) == Path("/x/opencode/opencode.db")
    assert default_db_path({"HOME": "/h"}) == Path("/h/.local/share/opencode/opencode.db")
