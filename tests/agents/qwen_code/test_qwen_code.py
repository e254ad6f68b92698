"""Qwen Code adapter: the recorded chat file, round trips, incremental capture, foreign sessions, hostile
input and install (no database)."""

from __future__ import annotations

import itertools
import json
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest
from agent_fixtures import fixtures

from mcp_memory.agents import adapter_for, get
from mcp_memory.agents.base import FormatError, NeutralSession, WriteOptions
from mcp_memory.agents.qwen_code import install
from mcp_memory.schema import MessageIn

REAL = fixtures("qwen-code")


@pytest.fixture
def adapter():
    return adapter_for("qwen-code")


def payloads(session: NeutralSession) -> list[dict]:
    return [message.payload() for message in session.messages]


def foreign_session() -> NeutralSession:
    when = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    messages = [
        MessageIn(role="system", content="You are helpful.", created_at=when),
        MessageIn(role="user", content="Is 200 QPS too much for one Postgres?", created_at=when),
        MessageIn(role="assistant", content="Let me check the notes.", thinking={"content": "Need the load numbers."},
                  tool_calls=[{"id": "toolu_1", "function": {"name": "Read", "arguments": '{"file_path": "notes.md"}'}},
                              {"id": "toolu_2", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}],
                  created_at=when),
        MessageIn(role="tool", tool_call_id="toolu_1", content="Peak 200 QPS", created_at=when),
        MessageIn(role="assistant", content="No queue needed.", created_at=when,
                  tool_calls=[{"id": "toolu_3", "function": {"name": "Bash", "arguments": '"pwd"'}}]),
        MessageIn(role="user", content=[{"type": "text", "text": "<system-reminder>x</system-reminder>",
                                         "scaffold": "reminder"}, {"type": "text", "text": "Thanks."}]),
    ]
    return NeutralSession(agent="claude-code", native_id="abc-123", messages=messages, meta={"cwd": "/srv/app"})


def test_the_recorded_chat_reads_as_its_conversation(adapter):
    assert REAL, "tests/fixtures/real/qwen-code holds no chat file"
    (session,) = adapter.read(REAL)
    said = [m for m in session.messages if not m.metadata.get("scaffold")]
    assert [m.role for m in said] == ["user", "assistant", "tool", "assistant", "tool", "assistant", "user",
                                      "assistant"]
    assert said[1].thinking.content.startswith("The user asks whether")
    assert [c.function.name for c in said[1].tool_calls] == ["read_file"]
    assert said[2].tool_call_id == said[1].tool_calls[0].id and "Peak load" in said[2].content
    assert said[-1].content.startswith("Decision: no Redis cache")
    assert session.meta["title"].startswith("Our order module peaks at 200 QPS")
    assert session.meta["cwd"] == "/tmp/agres/realgen-runs/qwen-en/work" and session.meta["version"] == "0.24.4"
    # Qwen Code's telemetry and snapshot records are kept, marked, and never conversation
    marked = [m for m in session.messages if m.metadata.get("scaffold")]
    assert marked and all(m.role == "system" and m.metadata["scaffold"] == "other" for m in marked)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_round_trip_is_byte_identical(adapter, path, tmp_path):
    (first,) = adapter.read([path])
    written = adapter.write(first, tmp_path, WriteOptions())
    assert written.files[0].read_bytes() == path.read_bytes()
    (second,) = adapter.read(written.files)
    assert payloads(second) == payloads(first) and second.native_id == first.native_id
    assert first.report.lossless and written.report.lossless
    assert shlex.split(written.resume_command)[-3:] == ["qwen", "--resume", first.native_id]


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_capture_line_by_line_gives_what_a_full_read_gives(adapter, path, tmp_path):
    lines = path.read_bytes().splitlines(keepends=True)
    growing = tmp_path / "chats" / path.name
    growing.parent.mkdir()
    growing.write_bytes(lines[0][:10])  # a line still being written waits
    cursor, captured = None, []
    for end in range(1, len(lines) + 1):
        sessions, cursor = adapter.read_incremental(growing, cursor)
        captured += [m for s in sessions for m in s.messages]
        growing.write_bytes(b"".join(lines[:end]))
    sessions, cursor = adapter.read_incremental(growing, cursor)
    captured += [m for s in sessions for m in s.messages]
    (full,) = adapter.read([path])
    assert [m.append_id for m in captured] == [m.append_id for m in full.messages]
    assert adapter.read_incremental(growing, cursor)[0] == []  # nothing new: nothing again


def test_another_file_at_the_same_path_starts_the_cursor_over(adapter, tmp_path):
    path = tmp_path / "chats" / "s.jsonl"
    path.parent.mkdir()
    path.write_text(REAL[0].read_text())
    _, cursor = adapter.read_incremental(path, None)
    record = {"uuid": "u1", "parentUuid": None, "sessionId": "s2", "type": "user", "cwd": "/x",
              "message": {"role": "user", "parts": [{"text": "a new chat"}]}}
    path.write_text(json.dumps(record) + "\n")
    (session,), _ = adapter.read_incremental(path, cursor)
    assert session.native_id == "s2" and session.messages[0].content == "a new chat"


def test_a_foreign_session_becomes_a_linked_chain_qwen_can_resume(adapter, tmp_path):
    written = adapter.install(foreign_session(), cwd=tmp_path / "work", env={"HOME": str(tmp_path)},
                              options=WriteOptions())
    (path,) = written.files
    assert path.parent == tmp_path / ".qwen" / "projects" / str(tmp_path / "work").replace("/", "-").replace(
        "_", "-") / "chats" and path.stem == written.native_id
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert {r["sessionId"] for r in records} == {written.native_id}
    assert {r["cwd"] for r in records} == {str(tmp_path / "work")}
    assert records[0]["parentUuid"] is None
    assert all(r["parentUuid"] == p["uuid"] for p, r in itertools.pairwise(records))
    kinds = [(r["type"], r["message"]["role"]) for r in records]
    assert kinds == [("user", "user"), ("assistant", "model"), ("tool_result", "user"), ("tool_result", "user"),
                     ("assistant", "model"), ("tool_result", "user"), ("user", "user")]
    parts = records[1]["message"]["parts"]
    assert parts[0] == {"text": "Need the load numbers.", "thought": True}
    assert [p["functionCall"]["name"] for p in parts[2:]] == ["Read", "Bash"]
    # an unanswered call gets an error result; arguments that are not an object are wrapped
    assert records[3]["message"]["parts"][0]["functionResponse"]["response"] == {
        "error": "no result was recorded for this call"}
    assert records[4]["message"]["parts"][1]["functionCall"]["args"] == {"value": "pwd"}
    assert records[-1]["message"]["parts"] == [{"text": "Thanks."}]  # the reminder part stays out
    report = written.report.to_dict()
    assert any("system message" in k for k in report["dropped"]) and any("scaffolding" in k for k in report["dropped"])
    assert shlex.split(written.resume_command) == ["cd", str(tmp_path / "work"), "&&", "qwen", "--resume",
                                                   written.native_id]
    (back,) = adapter.read([path])
    assert [m.content for m in back.messages if m.role == "user"] == ["Is 200 QPS too much for one Postgres?",
                                                                       "Thanks."]


def test_the_qwen_dir_follows_its_environment(adapter, tmp_path):
    assert adapter.install_dir(Path("/w"), {"HOME": "/h"}) == Path("/h/.qwen/projects/-w/chats")
    assert adapter.install_dir(Path("/w"), {"HOME": "/h", "QWEN_HOME": "/q"}) == Path("/q/projects/-w/chats")
    assert adapter.install_dir(Path("/w"), {"HOME": "/h", "QWEN_HOME": "/q", "QWEN_RUNTIME_DIR": "~/rt"}) == Path(
        "/h/rt/projects/-w/chats")


@pytest.mark.parametrize("text", [
    "not json\n", "[1, 2]\n", '{"uuid": 3}\n', '{"uuid": "u", "type": "user", "message": {"parts": "x"}}\n',
    '{"uuid": "u", "type": "assistant", "message": {"role": "model", "parts": [1, {"functionCall": "x"}]}}\n',
    '{"uuid": "u", "type": "tool_result", "message": {"parts": [{"functionResponse": {"id": 1}}]}}\n',
    '{"uuid": "u", "type": "user", "message": {"parts": [{"text": 5}, 7, {"inlineData": 1}]}}\n',
    '{"uuid": "u", "type": "assistant", "message": {"role": "model", "parts": [{"text": ["x"], "thought": true}]}}\n',
    "\xff\xfe".encode("latin-1").decode("latin-1") + "\n",
])
def test_hostile_lines_are_reported_never_crash(adapter, tmp_path, text):
    path = tmp_path / "chats" / "00000000-0000-4000-8000-000000000000.jsonl"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    (session,) = adapter.read_files([path])
    for message in session.messages:
        assert message.role in ("user", "assistant", "tool", "system")


def test_hook_payload_names_a_chat_file():
    agent = get("qwen-code")
    good = {"hook_event_name": "Stop", "transcript_path": "/h/.qwen/projects/-w/chats/abc.jsonl"}
    assert agent.path_from_hook(good) == Path("/h/.qwen/projects/-w/chats/abc.jsonl")
    for bad in ({"transcript_path": ""}, {"transcript_path": "/etc/passwd"}, {"transcript_path": 3}):
        with pytest.raises(FormatError, match="transcript_path"):
            agent.path_from_hook({"hook_event_name": "Stop", **bad})
    output = agent.session_start_output("remember this")
    assert output == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "remember this"}}


def test_install_merges_into_settings_and_uninstall_removes_only_ours(tmp_path):
    settings = tmp_path / ".qwen" / "settings.json"
    settings.parent.mkdir()
    theirs = {"matcher": "", "hooks": [{"type": "command", "command": "notify-send done"}]}
    settings.write_text(json.dumps({"model": {"name": "m"}, "mcpServers": {"other": {"command": "x"}},
                                    "hooks": {"Stop": [theirs]}}))
    args = {"scope": "user", "command": ["/bin/mcp-memory"], "env": {"MCP_MEMORY_HOME": "/p"}, "cwd": tmp_path,
            "environ": {"HOME": str(tmp_path)}}
    changes = install.register(**args)
    data = json.loads(settings.read_text())
    assert data["model"] == {"name": "m"} and data["mcpServers"]["other"] == {"command": "x"}
    assert data["mcpServers"]["mcp-memory"] == {"command": "/bin/mcp-memory", "args": ["serve"],
                                                "env": {"MCP_MEMORY_HOME": "/p"}}
    assert data["hooks"]["Stop"][0] == theirs
    assert data["hooks"]["Stop"][1]["hooks"][0]["command"] == "MCP_MEMORY_HOME=/p /bin/mcp-memory sync qwen-code --hook"
    assert data["hooks"]["SessionStart"][0]["hooks"][0]["command"].endswith("recall --hook --agent qwen-code")
    assert {e for e in data["hooks"]} == {"Stop", "SessionEnd", "SessionStart"} and len(changes) == 4
    assert install.register(**args) == []  # a second run changes nothing
    install.register(**args, uninstall=True)
    assert json.loads(settings.read_text()) == {"model": {"name": "m"}, "mcpServers": {"other": {"command": "x"}},
                                                "hooks": {"Stop": [theirs]}}
    project = install.settings_path("project", tmp_path / "w", {"HOME": "/h"})
    assert project == tmp_path / "w" / ".qwen" / "settings.json"
    assert install.settings_path("user", tmp_path, {"HOME": "/h", "QWEN_HOME": "/q"}) == Path("/q/settings.json")


def test_install_refuses_settings_it_cannot_merge(tmp_path):
    settings = tmp_path / ".qwen" / "settings.json"
    settings.parent.mkdir()
    args = {"scope": "user", "command": ["mcp-memory"], "env": {}, "cwd": tmp_path, "environ": {"HOME": str(tmp_path)}}
    for text, rule in (("{oops", "not plain JSON"), ('{"hooks": []}', "hooks is not an object"),
                       ('{"hooks": {"Stop": {}}}', "hooks.Stop is not a list")):
        settings.write_text(text)
        with pytest.raises(ValueError, match=rule):
            install.register(**args)
        assert settings.read_text() == text  # nothing half-written
