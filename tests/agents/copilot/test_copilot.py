"""GitHub Copilot CLI adapter: the recorded session, round trips, foreign sessions, capture cursors,
hook payloads and install (no database)."""

from __future__ import annotations

import itertools
import json
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest
from agent_fixtures import fixtures

from mcp_memory.agents import FormatError, adapter_for, get
from mcp_memory.agents.base import NeutralSession, WriteOptions
from mcp_memory.agents.copilot import install as copilot_install
from mcp_memory.agents.copilot.hooks import events_file
from mcp_memory.schema import MessageIn

(REAL,) = fixtures("copilot")


@pytest.fixture
def adapter():
    return adapter_for("copilot")


def payloads(session: NeutralSession) -> list[dict]:
    return [m.payload() for m in session.messages]


def foreign() -> NeutralSession:
    when = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    calls = [{"id": "toolu_1", "function": {"name": "Read", "arguments": json.dumps({"file_path": "notes.md"})}},
             {"id": "toolu_2", "function": {"name": "Bash", "arguments": json.dumps("ls")}}]
    return NeutralSession(agent="claude-code", native_id="abc-123", meta={"cwd": "/srv/app", "title": "QPS"}, messages=[
        MessageIn(role="system", content="be brief", created_at=when),
        MessageIn(role="user", content="Is 200 QPS too much?", created_at=when),
        MessageIn(role="assistant", content="Let me check.", thinking={"content": "Need numbers."},
                  tool_calls=calls, created_at=when),
        MessageIn(role="tool", tool_call_id="toolu_1", content="Peak 200 QPS", created_at=when),
        MessageIn(role="tool", tool_call_id="nobody", content="stray", created_at=when),
        MessageIn(role="assistant", content="No queue needed.", created_at=when)])


def test_the_recorded_session_reads_as_the_conversation(adapter):
    (session,) = adapter.read([REAL])
    roles = [m.role for m in session.messages]
    assert roles == ["user", "system", "assistant", "tool", "assistant", "tool", "assistant", "user", "assistant"]
    assert session.messages[1].metadata["scaffold"] == "instructions"
    call = session.messages[2].tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)["command"]) == ("bash", "cat design-notes.md")
    assert session.messages[3].tool_call_id == call.id and "200 QPS" in session.messages[3].content
    assert session.messages[2].thinking.content.startswith("The user asks whether")
    assert session.messages[-1].content.startswith("Decision: no Redis cache")
    assert session.native_id == "04594537-4c65-4cd6-a389-1d8a30b550a5"
    assert session.meta["cwd"] == "/tmp/agres/realgen-runs/copilot-en/work" and session.meta["model"] == "fake-model"
    assert session.meta["title"].startswith("Our order module peaks at 200 QPS")


def test_round_trip_is_lossless_event_for_event(adapter, tmp_path):
    (first,) = adapter.read([REAL])
    written = adapter.write(first, tmp_path, WriteOptions())
    assert written.files[0].read_bytes() == REAL.read_bytes()
    (second,) = adapter.read(written.files)
    assert payloads(second) == payloads(first) and second.native_id == first.native_id
    assert written.report.lossless
    assert shlex.split(written.resume_command)[-1] == f"--resume={first.native_id}"


def test_a_foreign_session_becomes_the_events_copilot_resumes(adapter, tmp_path):
    written = adapter.write(foreign(), tmp_path, WriteOptions(cwd=Path("/srv/app")))
    events = [json.loads(line) for line in written.files[0].read_text().splitlines()]
    assert [e["type"] for e in events] == ["session.start", "user.message", "assistant.message",
                                           "tool.execution_complete", "tool.execution_complete", "assistant.message"]
    assert events[0]["data"]["sessionId"] == written.native_id == written.files[0].parent.name
    assert all(e["parentId"] == p["id"] for p, e in itertools.pairwise(events))
    requests = events[2]["data"]["toolRequests"]
    assert requests[0]["arguments"] == {"file_path": "notes.md"} and requests[1]["arguments"] == {"input": "ls"}
    assert events[2]["data"]["reasoningText"] == "Need numbers."
    assert [e["data"]["result"]["content"] for e in events[3:5]] == [
        "(no result was recorded for this call)", "Peak 200 QPS"]
    report = written.report
    assert report.dropped["system message (Copilot writes its own system prompt)"] == 1
    assert report.dropped["tool result without its tool call"] == 1
    assert report.synthesized["tool result for a tool call that has none"] == 1
    assert shlex.split(written.resume_command) == ["cd", "/srv/app", "&&", "copilot", f"--resume={written.native_id}"]
    assert "cwd: \"/srv/app\"" in (written.files[0].parent / "workspace.yaml").read_text()
    (back,) = adapter.read(written.files)
    assert [m.content for m in back.messages if m.role == "user"] == ["Is 200 QPS too much?"]
    again = adapter.write(foreign(), tmp_path / "again", WriteOptions(cwd=Path("/srv/app")))
    assert again.files[0].read_text() == written.files[0].read_text()  # deterministic


def test_install_never_overwrites_a_session_folder(adapter, tmp_path):
    (session,) = adapter.read([REAL])
    env = {"HOME": str(tmp_path)}
    first = adapter.install(session, cwd=tmp_path, env=env, options=WriteOptions())
    second = adapter.install(session, cwd=tmp_path, env=env, options=WriteOptions())
    assert first.native_id == session.native_id and second.native_id != first.native_id
    assert first.files[0].parent.parent == tmp_path / ".copilot" / "session-state"
    assert adapter.install_dir(tmp_path, {"COPILOT_HOME": "/x", "HOME": "/y"}) == Path("/x/session-state")


def test_capture_reads_only_complete_new_lines_with_the_same_ids(adapter, tmp_path):
    lines = REAL.read_bytes().splitlines(keepends=True)
    path = tmp_path / "s" / "events.jsonl"
    path.parent.mkdir()
    (full,) = adapter.read([REAL])
    got, cursor = [], None
    for cut in (5, 12, 12, len(lines) - 3, len(lines)):
        path.write_bytes(b"".join(lines[:cut]) + (lines[cut][:10] if cut < len(lines) else b""))
        (session,), cursor = adapter.read_incremental(path, cursor)
        got.extend(session.messages)
        assert session.native_id == full.native_id
    assert [m.append_id for m in got] == [m.append_id for m in full.messages]
    assert [m.payload() for m in got] == payloads(full)
    path.write_bytes(lines[0])  # another, shorter file at that path starts over
    (session,), cursor = adapter.read_incremental(path, cursor)
    assert cursor["offset"] == len(lines[0])


def test_hostile_files_and_payloads_are_refused_by_name(adapter, tmp_path):
    bad = tmp_path / "x" / "events.jsonl"
    bad.parent.mkdir()
    bad.write_text("hello\n")
    with pytest.raises(FormatError, match="not a Copilot events file"):
        adapter.read_files([bad])
    bad.write_text('{"type": "user.message", "data": []}\n{"type": 3}\nnot json\n')
    (session,) = adapter.read_files([bad])
    assert session.report.dropped == {"line that is not a Copilot event": 1, "undecodable JSON line": 1}
    with pytest.raises(FormatError, match=r"transcriptPath must be a Copilot events\.jsonl"):
        events_file({"transcriptPath": "/etc/passwd"}, None, {})
    with pytest.raises(FormatError, match="sessionId must be a session uuid"):
        events_file({"sessionId": "../../etc"}, None, {"HOME": "/h"})
    sid = "04594537-4c65-4cd6-a389-1d8a30b550a5"
    assert events_file({"sessionId": sid, "reason": "complete"}, None, {"HOME": "/h"}) == Path(
        f"/h/.copilot/session-state/{sid}/events.jsonl")
    with pytest.raises(FormatError, match="no such session file"):
        get("copilot").capture_target(path=None, session=None, hook={"sessionId": sid}, environ={"HOME": str(tmp_path)})


def test_the_recall_hook_output_is_additional_context():
    agent = get("copilot")
    assert agent.session_start_output("ctx") == {"additionalContext": "ctx"}
    assert agent.recall_wanted({"source": "resume"})  # not kept in the session: each run gets it


def test_install_merges_keeps_theirs_and_uninstalls_only_ours(tmp_path):
    home = tmp_path / ".copilot"
    home.mkdir()
    theirs = {"type": "command", "bash": "notify-send done", "timeoutSec": 5}
    (home / "settings.json").write_text(json.dumps({"model": "x", "hooks": {"agentStop": [theirs]}}))
    (home / "mcp-config.json").write_text(json.dumps({"mcpServers": {"other": {"command": "o"}}}))

    def run(**kwargs):
        return copilot_install.register(scope="user", command=["/bin/mcp-memory"], env={"MCP_MEMORY_DSN": "x"},
                                        cwd=tmp_path, environ={"HOME": str(tmp_path)}, **kwargs)

    lines = run()
    assert lines[0] == f"{home / 'mcp-config.json'}: added MCP server mcp-memory (/bin/mcp-memory serve)"
    assert [line.split(" hook ")[0].rsplit(" ", 1)[-1] for line in lines[1:]] == [
        "agentStop", "sessionEnd", "sessionStart"]
    servers = json.loads((home / "mcp-config.json").read_text())["mcpServers"]
    assert servers["other"] == {"command": "o"} and servers["mcp-memory"] == {
        "type": "local", "command": "/bin/mcp-memory", "args": ["serve"], "env": {"MCP_MEMORY_DSN": "x"},
        "tools": ["*"]}
    settings = json.loads((home / "settings.json").read_text())
    assert settings["model"] == "x" and settings["hooks"]["agentStop"][0] == theirs
    assert settings["hooks"]["agentStop"][1]["bash"] == "MCP_MEMORY_DSN=x /bin/mcp-memory sync copilot --hook"
    assert settings["hooks"]["sessionStart"][0]["bash"].endswith("recall --hook --agent copilot")
    assert run() == []
    assert len(run(uninstall=True)) == 4
    settings = json.loads((home / "settings.json").read_text())
    assert settings == {"model": "x", "hooks": {"agentStop": [theirs]}}
    assert json.loads((home / "mcp-config.json").read_text()) == {"mcpServers": {"other": {"command": "o"}}}
    with pytest.raises(ValueError, match="unknown scope 'project'; choose user"):
        copilot_install.register(scope="project", command=["x"], env={}, cwd=tmp_path, environ={"HOME": str(tmp_path)})
    (home / "settings.json").write_text("// a comment\n{}")
    with pytest.raises(ValueError, match="is not plain JSON"):
        run()
