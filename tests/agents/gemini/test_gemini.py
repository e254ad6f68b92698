"""Gemini CLI adapter: real and published chat files, replay rules, round trips, foreign sessions, install."""

from __future__ import annotations

import hashlib
import json
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import adapter_for
from mcp_memory.agents.base import NeutralSession, WriteOptions
from mcp_memory.agents.gemini.write import file_tag
from mcp_memory.schema import MessageIn

SHARED = FIXTURES
REAL = SHARED / "real" / "gemini" / "en" / ".gemini"
FIXTURES = sorted((SHARED / "gemini").glob("session-*")) + sorted(
    (SHARED / "gemini").glob("ai-sessions.*.json")
)
FIXTURES += sorted(REAL.rglob("session-*.jsonl"))


@pytest.fixture
def adapter():
    return adapter_for("gemini")


def payloads(session: NeutralSession) -> list[dict]:
    return [message.payload() for message in session.messages]


def without_cwd(meta: dict) -> dict:
    """cwd comes from the project folder's .project_root marker, not from the file itself."""
    return {key: value for key, value in meta.items() if key != "cwd"}


def foreign_session() -> NeutralSession:
    when = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    messages = [
        MessageIn(role="user", content="Is 200 QPS too much for one Postgres?", created_at=when),
        MessageIn(
            role="assistant",
            content="Let me check the notes.",
            thinking={"content": "Need the load numbers."},
            tool_calls=[
                {
                    "id": "toolu_1",
                    "function": {"name": "Read", "arguments": json.dumps({"file_path": "notes.md"})},
                },
                {"id": "toolu_2", "function": {"name": "Bash", "arguments": json.dumps({"command": "ls"})}},
            ],
            created_at=when,
        ),
        MessageIn(role="tool", tool_call_id="toolu_1", content="Peak 200 QPS", created_at=when),
        MessageIn(role="tool", tool_call_id="toolu_2", content="notes.md", created_at=when),
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
    assert without_cwd(second.meta) == without_cwd(first.meta)
    assert second.native_id == first.native_id
    assert first.report.lossless and written.report.lossless
    assert written.files[0].suffix == ".jsonl"


def test_real_chat_after_a_resume(adapter):
    """0.61 reloads the history on resume ($set messages) and writes each tool answer twice."""
    (session,) = adapter.read([REAL])
    assert session.native_id == "50a31571-e7c3-4c6f-95b0-4943a6bce346"
    roles = [m.role for m in session.messages]
    assert roles == [
        "user",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    calls = [c for m in session.messages for c in m.tool_calls or []]
    assert [c.function.name for c in calls] == ["read_file", "run_shell_command"]
    assert [m.tool_call_id for m in session.messages if m.role == "tool"] == [c.id for c in calls]
    assert session.messages[3].content.startswith("# Order module design notes")
    assert session.messages[2].thinking.content.startswith("The user asks whether")
    assert session.messages[-1].content.startswith("Decision: no Redis cache")
    assert (
        session.meta["cwd"] == "/tmp/realgen-runs/gemini-en/work"
        and session.meta["model"] == "gemini-2.5-pro"
    )
    assert (
        session.report.transformed[
            "functionResponse repeating an answered call (resume reload) → not repeated"
        ]
        == 2
    )
    ids = [m.append_id for m in session.messages]
    assert len(set(ids)) == len(ids) and ids == [m.append_id for m in adapter.read([REAL])[0].messages]


def test_legacy_json_tool_results(adapter):
    (session,) = adapter.read([SHARED / "gemini" / "ai-sessions.session-2025-10-18T14-57-f86f5318.json"])
    tools = [m for m in session.messages if m.role == "tool"]
    assert [t.tool_call_id for t in tools] == [
        "list_directory-1760799451650-5979488a89c64",
        "read_file-1760799465000-abc123",
        "read_many_files-12345",
    ]
    assert (
        tools[2].content
        == "Tool execution succeeded.\n--- file1.txt ---\nContent of file 1\n--- file2.txt ---\nContent of file 2"
    )
    assert session.messages[1].thinking.content.startswith("**Analyzing Directory Structure** I've started")
    assert session.report.synthesized["tool message from toolCalls[].result"] == 3


def test_replay_rules(adapter, tmp_path):
    header = {
        "sessionId": "11111111-2222-4333-8444-555555555555",
        "projectHash": "h",
        "startTime": "2026-01-01T00:00:00.000Z",
        "lastUpdated": "2026-01-01T00:00:00.000Z",
    }
    lines = [
        header,
        {"id": "u1", "timestamp": "2026-01-01T00:00:01.000Z", "type": "user", "content": [{"text": "first"}]},
        {"id": "g1", "timestamp": "2026-01-01T00:00:02.000Z", "type": "gemini", "content": "draft"},
        {"id": "g1", "timestamp": "2026-01-01T00:00:02.000Z", "type": "gemini", "content": "final"},
        {"id": "u2", "timestamp": "2026-01-01T00:00:03.000Z", "type": "user", "content": "dropped by rewind"},
        {"$rewindTo": "u2"},
        {"id": "i1", "timestamp": "2026-01-01T00:00:04.000Z", "type": "info", "content": "Switched model"},
        {"$set": {"summary": "A summary"}},
    ]
    path = tmp_path / "session-2026-01-01T00-00-11111111.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    (session,) = adapter.read([tmp_path])
    assert [(m.role, m.content) for m in session.messages] == [
        ("user", "first"),
        ("assistant", "final"),
        ("system", "Switched model"),
    ]
    assert session.meta["title"] == "A summary"
    assert session.report.transformed["$rewindTo: rewound message records (discarded by Gemini too)"] == 1


def test_foreign_session_keeps_texts_and_call_pairs(adapter, tmp_path):
    written = adapter.write(foreign_session(), tmp_path, WriteOptions(thinking="text", cwd=Path("/srv/app")))
    records = [json.loads(line) for line in written.files[0].read_text().splitlines()]
    assert records[0]["sessionId"] == written.native_id and records[0]["kind"] == "main"
    results = records[2]["toolCalls"]
    assert [r["result"][0]["functionResponse"]["response"]["output"] for r in results] == [
        "Peak 200 QPS",
        "notes.md",
    ]
    (session,) = adapter.read(written.files)
    texts = [m.content for m in session.messages if m.content]
    assert texts == [
        "Is 200 QPS too much for one Postgres?",
        "Let me check the notes.",
        "Peak 200 QPS",
        "notes.md",
        "No queue needed.",
    ]
    pairs = [(c.id, c.function.name) for m in session.messages for c in m.tool_calls or []]
    assert pairs == [("toolu_1", "Read"), ("toolu_2", "Bash")]
    assert [m.tool_call_id for m in session.messages if m.role == "tool"] == ["toolu_1", "toolu_2"]
    assert session.messages[1].thinking.content == "Need the load numbers."
    assert shlex.split(written.resume_command) == ["cd", "/srv/app", "&&", "gemini", "--resume", written.native_id]
    # named after the start minute, with a tag other than the id's first 8 characters (write.chat_file_name)
    assert written.files[0].name == f"session-2026-11-29T09-00-{written.native_id[-8:]}.jsonl"


def test_the_file_tag_is_never_the_ids_first_8_characters():
    """Gemini 0.61 deletes every `session-*-<id[:8]>.jsonl` with the stub a resume leaves: our chat
    file must end in another 8 characters (8, so that `gemini --delete-session` still finds it)."""
    plain = "12008607-8071-4640-bbea-4a2a9c9b8b21"
    assert file_tag(plain) == "9c9b8b21"
    same = "abcdefab-0000-4000-8000-0000abcdefab"  # last 8 hex digits equal the first 8
    assert len(file_tag(same)) == 8 and file_tag(same) != same[:8] and file_tag(same).isalnum()
    assert file_tag(same) == file_tag(same)  # deterministic: a second export overwrites the same file


def test_unanswered_call_gets_an_error_result(adapter, tmp_path):
    source = foreign_session()
    source.messages = source.messages[:2]
    written = adapter.write(source, tmp_path, WriteOptions())
    assert written.report.synthesized["error result for a tool call that has none"] == 2
    assert written.report.dropped["thinking (thinking policy: drop)"] == 1


def test_install_dir_follows_the_project_registry(adapter, tmp_path):
    env = {"HOME": str(tmp_path)}
    project = tmp_path / "work"
    gemini = tmp_path / ".gemini"
    hashed = adapter.install_dir(project, env)
    assert hashed.parent.name == hashlib.sha256(str(project).encode()).hexdigest()
    (gemini / "tmp" / "work").mkdir(parents=True)
    (gemini / "tmp" / "work" / ".project_root").write_text(str(project))
    assert adapter.install_dir(project, env) == gemini / "tmp" / "work" / "chats"
    (gemini / "projects.json").write_text(json.dumps({"projects": {str(project): "work-1"}}))
    assert adapter.install_dir(project, env) == gemini / "tmp" / "work-1" / "chats"
    assert adapter.install_dir(project, {"HOME": "/x", "GEMINI_CLI_HOME": "/g"}).parts[:3] == (
        "/",
        "g",
        ".gemini",
    )


def test_install_refreshes_last_updated(adapter, tmp_path):
    written = adapter.install(
        foreign_session(), cwd=tmp_path / "work", env={"HOME": str(tmp_path)}, options=WriteOptions()
    )
    header = json.loads(written.files[0].read_text().splitlines()[0])
    assert (
        header["lastUpdated"] > "2026-11-29T09:00:00.000Z"
        and header["startTime"] == "2026-11-29T09:00:00.000Z"
    )
    assert header["projectHash"] == hashlib.sha256(str(tmp_path / "work").encode()).hexdigest()


def test_resume_stub_with_the_same_session_id_is_folded_into_the_full_session(tmp_path) -> None:
    """Gemini CLI 0.61 leaves a 2-line stub (header + setup text) named for a later minute when a
    session is resumed across minutes; reading the folder gives one session, the full one."""
    import json

    from mcp_memory.agents import adapter_for

    real = sorted((SHARED / "real" / "gemini").rglob("session-*.jsonl"))
    assert real
    full = real[0]
    header = json.loads(full.read_text().splitlines()[0])
    stub = tmp_path / "chats" / "session-2099-01-01T00-00-stub.jsonl"
    stub.parent.mkdir()
    (tmp_path / "chats" / full.name).write_text(full.read_text())
    setup = {"$set": {"messages": [{"id": "x1", "timestamp": "2099-01-01T00:00:00Z", "type": "user",
                                    "content": [{"text": "<session_context>\nsetup\n</session_context>"}]}]}}
    stub.write_text(json.dumps(header) + "\n" + json.dumps(setup) + "\n")
    sessions = adapter_for("gemini").read([tmp_path])
    assert len(sessions) == 1
    assert len(sessions[0].messages) == len(adapter_for("gemini").read([full])[0].messages)
    assert sessions[0].report.dropped["chat file with the same sessionId (a resume stub)"] == 1
