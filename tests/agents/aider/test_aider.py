"""The Aider adapter on the recorded history (tests/fixtures/real/aider/): blocks as Aider reads
them, an exact rewrite, incremental reads equal to a full read, foreign sessions written as Aider
writes them, hostile files refused with a clear error, and the `read:` entry of install."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_fixtures import FIXTURES
from ruamel.yaml import YAML

from mcp_memory.agents import FormatError, NeutralSession, WriteOptions
from mcp_memory.agents.aider import install
from mcp_memory.agents.aider.adapter import AiderAdapter
from mcp_memory.schema import MessageIn

RECORDED = FIXTURES / "real" / "aider" / "en" / ".aider.chat.history.md"


def conversation(session: NeutralSession) -> list[tuple[str, str]]:
    return [(m.role, str(m.content)) for m in session.messages if "scaffold" not in m.metadata]


def test_the_recorded_history_reads_as_two_turns_with_aiders_output_marked() -> None:
    (session,) = AiderAdapter().read_files([RECORDED])
    talk = conversation(session)
    assert [role for role, _ in talk] == ["user", "assistant", "user", "assistant"]
    assert talk[0][1].startswith("Our order module peaks at 200 QPS") and talk[1][1].startswith("Decision: do not add")
    kinds = {m.metadata.get("scaffold") for m in session.messages}
    assert kinds == {None, "environment", "other", "command"}  # `/run ls` is said to Aider, not the model


def test_written_back_the_file_is_the_same_bytes_below_our_id_line(tmp_path: Path) -> None:
    (session,) = AiderAdapter().read([RECORDED])
    written = AiderAdapter().write(session, tmp_path, WriteOptions())
    first, rest = written.files[0].read_text().split("\n", 1)
    assert first == f"# mcp-memory session: {written.native_id}" and rest == RECORDED.read_text()
    (again,) = AiderAdapter().read(written.files)
    assert again.native_id == written.native_id and conversation(again) == conversation(session)
    second = AiderAdapter().write(session, tmp_path, WriteOptions())  # never over the first file
    assert second.files[0] != written.files[0] and "--chat-history-file" in (second.resume_command or "")


def test_reading_as_the_file_grows_gives_what_a_full_read_gives(tmp_path: Path) -> None:
    data, target, cursor, got = RECORDED.read_bytes(), tmp_path / ".aider.chat.history.md", None, []
    for end in range(7, len(data) + 7, 7):
        target.write_bytes(data[:end])
        sessions, cursor = AiderAdapter().read_incremental(target, cursor)
        got += [m for s in sessions for m in s.messages]
    (full,) = AiderAdapter().read([target])
    assert [(m.append_id, m.content) for m in got] == [(m.append_id, m.content) for m in full.messages]


def test_tool_calls_become_reply_text_and_the_report_says_so(tmp_path: Path) -> None:
    session = NeutralSession(agent="claude-code", native_id="s1", messages=[
        MessageIn(role="user", content="read notes"),
        MessageIn.model_validate({"role": "assistant", "content": "> quoted", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": '{"file_path": "n.md"}'}}]}),
        MessageIn(role="tool", tool_call_id="c1", content="the code word is quokka"),
        MessageIn(role="assistant", content="quokka it is")])
    written = AiderAdapter().write(session, tmp_path, WriteOptions())
    report = written.report.to_dict()
    assert any("tool calls" in item for item in report["transformed"]), report
    (back,) = AiderAdapter().read(written.files)
    talk = conversation(back)
    assert talk[0] == ("user", "read notes") and len(talk) == 2
    assert "\n > quoted\n" in written.files[0].read_text()  # not a `> ` line of Aider's own output
    assert "> quoted" in talk[1][1] and "Called Read" in talk[1][1] and "quokka it is" in talk[1][1]


@pytest.mark.parametrize(("data", "words"), [
    (b"\n# aider chat started at 2026-01-01 00:00:00\n#### caf\xe9\n", "is not UTF-8"),
    (b"# mcp-memory session: ../../etc\n", "holds no plain id"),
])
def test_a_damaged_file_is_refused_naming_the_problem(tmp_path: Path, data: bytes, words: str) -> None:
    target = tmp_path / ".aider.chat.history.md"
    target.write_bytes(data)
    with pytest.raises(FormatError, match=words):
        AiderAdapter().read_files([target])


def test_install_adds_the_recall_file_to_read_and_uninstall_takes_only_it_out(tmp_path: Path) -> None:
    config = tmp_path / ".aider.conf.yml"
    config.write_text("# mine\nread: CONVENTIONS.md\nmodel: gpt-x\n")
    args = {"scope": "project", "command": ["mcp-memory"], "env": {}, "cwd": tmp_path, "environ": {}}
    install.register(**args)
    assert YAML().load(config.read_text())["read"] == ["CONVENTIONS.md", install.RECALL_FILE]
    assert "# mine" in config.read_text()
    assert "already in read" in install.register(**args)[0]
    install.register(**args, uninstall=True)
    assert YAML().load(config.read_text())["read"] == ["CONVENTIONS.md"]
    config.write_text("read: {a: 1}\n")
    with pytest.raises(ValueError, match="read is neither a file name nor a list"):
        install.register(**args)
