"""DeepSeek harness adapter: event logs (plain and multi-frame zstd), write, install, round trip."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import adapter_for
from mcp_memory.agents.base import NeutralSession, WriteOptions
from mcp_memory.agents.deepseek_harness.adapter import encode_segment, project_key, read_lines

TESTS = Path(__file__).resolve().parents[2] / "fixtures"
SHARED = FIXTURES / "dsh"
ZSTD = TESTS / "deepseek" / "e128dda9-ed11-4868-8266-0ef90d03c3d6" / "session.jsonl.zstd"
LOGS = sorted(SHARED.glob("*.session.jsonl")) + [ZSTD]

adapter = adapter_for("deepseek-harness")


def _read(path: Path) -> NeutralSession:
    [session] = adapter.read([path])
    return session


def _needs(path: Path) -> None:
    assert path.exists(), path


def test_zstd_multi_frame_log_reads_with_times() -> None:
    session = _read(ZSTD)
    assert [m.role for m in session.messages] == ["user", "system", "assistant", "tool", "assistant"]
    call, result, answer = session.messages[2:]
    assert call.tool_calls[0].id == "call_00_fkbBRJsUrGKd1pWVc4Gn8233"
    assert json.loads(call.tool_calls[0].function.arguments)["command"] == "echo TERMINAL_OK"
    assert result.tool_call_id == call.tool_calls[0].id and result.content == "TERMINAL_OK\n"
    assert answer.content == "DONE" and answer.thinking.content.startswith("The command ran successfully")
    assert answer.metadata["model"] == "deepseek-v4-flash"
    assert answer.metadata["provider"] == "deepseek-official"
    assert session.meta["cwd"] == "/home/dev/demo" and session.meta["title"] == "Use the bash tool to"
    times = [m.created_at for m in session.messages]
    assert times == sorted(times) and len(set(times)) > 1
    assert session.report.transformed["plugin-injected user message (runtime context) → system message"] == 1


def test_parallel_tool_calls_pair_with_user_side_results() -> None:
    path = SHARED / "dsh-parallel-tool-calls.session.jsonl"
    _needs(path)
    session = _read(path)
    calls = session.messages[2].tool_calls
    assert [c.id for c in calls] == ["call_read_a", "call_read_b"]
    results = [m for m in session.messages if m.role == "tool"]
    assert [m.tool_call_id for m in results] == ["call_read_a", "call_read_b"]
    assert "alpha" in results[0].content and "beta" in results[1].content
    assert len({m.append_id for m in session.messages}) == len(session.messages)


def test_folder_read_finds_logs() -> None:
    assert [s.native_id for s in adapter.read([TESTS / "deepseek"])] == [
        "e128dda9-ed11-4868-8266-0ef90d03c3d6"
    ]


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.parent.name if p.suffix == ".zstd" else p.name)
@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_round_trip_is_lossless(path: Path, compression: str, tmp_path: Path) -> None:
    _needs(path)
    session = _read(path)
    written = adapter.write(session, tmp_path, WriteOptions(extra={"compression": compression}))
    assert [json.loads(line) for line in read_lines(written.files[0])] == [
        json.loads(line) for line in read_lines(path)
    ]
    assert written.report.lossless
    assert written.files[0].name == ("session.jsonl.zstd" if compression == "zstd" else "session.jsonl")
    assert written.files[0].parent.name == encode_segment(session.native_id)
    assert shlex.split(written.resume_command) == ["dsh", "--profile", "tui", "--resume", session.native_id]
    again = _read(written.files[0])
    assert [m.payload() for m in again.messages] == [m.payload() for m in session.messages]


def _check_log(lines: list[dict]) -> None:
    """The invariants dsh's loader checks that a synthesized log can be held to."""
    seqs = [line["seq"] for line in lines]
    assert seqs == sorted(set(seqs)) and seqs[0] == 0
    depth = {"turn": 0, "step": 0}
    for line in lines:
        kind = line["type"]
        for bracket in ("turn", "step"):
            depth[bracket] += (kind == f"{bracket}/start") - (kind == f"{bracket}/end")
            assert depth[bracket] in (0, 1)
        if kind == "assistant/message":
            source = line["data"]["message"]["source"]
            assert source["provider"] and source["model"]
    assert depth == {"turn": 0, "step": 0}
    kinds = [line["type"] for line in lines]
    assert kinds.index("request/header") < kinds.index("assistant/message")


def test_foreign_session_gives_a_well_formed_log(tmp_path: Path) -> None:
    [source] = adapter_for("openai").read([TESTS / "openai" / "chat-parts-parallel-tools.json"])
    written = adapter.write(source, tmp_path, WriteOptions(cwd=Path("/home/dev/demo")))
    header, *rest = [json.loads(line) for line in read_lines(written.files[0])]
    assert header["type"] == "session" and header["version"] == 0 and header["cwd"] == "/home/dev/demo"
    _check_log(rest)
    assert [line["seq"] for line in rest] == list(range(len(rest)))
    tool_calls = [line for line in rest if line["type"] == "tool/call"]
    assert [line["data"]["callId"] for line in tool_calls] == ["call_a", "call_b"]
    assert written.report.dropped["content part image_url (dsh stores images as attachments)"] == 1
    assert written.report.synthesized["assistant source.provider 'imported'"] >= 1
    back = _read(written.files[0])
    assert [m.role for m in back.messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert back.messages[2].thinking.content == "Read both files in one step."
    again = adapter.write(source, tmp_path / "again", WriteOptions(cwd=Path("/home/dev/demo")))
    assert again.native_id == written.native_id  # deterministic from the source session


def test_appending_foreign_messages_continues_seq_and_turns(tmp_path: Path) -> None:
    session = _read(ZSTD)
    [extra] = adapter_for("openai").read([TESTS / "openai" / "chat-parts-parallel-tools.json"])
    session.messages.extend(extra.messages[1:])
    written = adapter.write(session, tmp_path, WriteOptions())
    lines = [json.loads(line) for line in read_lines(written.files[0])][1:]
    turns = [line["data"]["turn"] for line in lines if line["type"] == "turn/start"]
    assert turns == [1, 2]
    _check_log([line for line in lines if "seq" in line])  # chunk rows carry seq0 instead
    ends = [line["seq0"] + len(line["data"]["dt"]) if "seq0" in line else line["seq"] + 1 for line in lines]
    starts = [line.get("seq", line.get("seq0")) for line in lines]
    assert starts[1:] == ends[:-1]  # contiguous, packed chunk rows included


def test_install_dir_follows_dsh_home_and_project_key(tmp_path: Path) -> None:
    cwd = Path("/home/dev/my project")
    assert adapter.install_dir(cwd, {"HOME": "/home/dev"}) == Path(
        "/home/dev/.dsh/sessions/--home-dev-my~0020project--"
    )
    assert adapter.install_dir(cwd, {"DSH_HOME": str(tmp_path), "HOME": "/x"}).parent == tmp_path / "sessions"
    session = _read(ZSTD)
    written = adapter.install(session, cwd=cwd, env={"DSH_HOME": str(tmp_path)}, options=WriteOptions())
    assert written.files[0].parent.parent.name == "--home-dev-my~0020project--"
    assert json.loads(read_lines(written.files[0])[0])["cwd"] == str(cwd)
    assert written.report.transformed["session cwd (header rewritten for the target project)"] == 1


def test_project_key_and_segment_escaping() -> None:
    assert project_key(None) == "_no-cwd"
    assert project_key("C:\\Users\\me") == "--C-Users-me--"
    assert project_key("/a//b/é") == "--a-b-~00E9--"
    assert len(project_key("/" + "x" * 400)) == 255
    assert encode_segment("a.b") == "a~002Eb"
