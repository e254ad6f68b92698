"""Hostile files in the capture spool (spool.py): a file nested 100,000 deep, one too big, one of the
wrong shape is set aside with its reason and listed; the good files beside it are delivered, and
capture, `spool list` and `doctor` go on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from agent_fixtures import claude_transcript

from mcp_memory import spool as spool_module
from mcp_memory.config import load_settings
from mcp_memory.schema import MessageIn, NeutralSession
from mcp_memory.spool import Spool

HOSTILE = {
    "deep": (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
    "deep object": (b'{"sessions": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "nested deeper"),
    "list": (b"[1, 2]", "not a JSON object"),
    "no json": (b"{not json", "JSONDecodeError"),
    "not utf-8": (b'{"sessions": "\xff"}', "UnicodeDecodeError"),
    "sessions not a list": (b'{"sessions": {"a": 1}}', "sessions a list"),
    "session not an object": (b'{"sessions": [[1]]}', "AttributeError"),
    "meta not an object": (b'{"sessions": [{"agent": "a", "native_id": "n", "meta": [1], "messages": []}]}',
                           "meta (an object)"),
    "bad message": (b'{"sessions": [{"agent": "a", "native_id": "n", "messages": [{"role": "x"}]}]}',
                    "ValidationError"),
}


def _session(native_id: str) -> NeutralSession:
    return NeutralSession(agent="claude-code", native_id=native_id,
                          messages=[MessageIn(role="user", content="hello", append_id=f"{native_id}-1")])


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_spool_file_is_set_aside_with_its_reason(tmp_path: Path, kind: str) -> None:
    data, reason = HOSTILE[kind]
    spool = Spool(tmp_path / "spool")
    spool.add([_session("before")], project="p", reason="the database was unreachable")
    (spool.folder / "2-hostile.json").write_bytes(data)
    spool.add([_session("after")], project="p", reason="the database was unreachable")
    pending = spool.pending()
    assert [p.sessions[0].native_id for p in pending] == ["before", "after"]  # the others still wait
    [kept] = spool.unreadable()
    assert kept.name == "2-hostile" and reason in kept.reason, kept.reason
    assert kept.path.read_bytes() == data  # kept as it was, for the user
    assert len(spool.pending()) == 2 and len(spool.unreadable()) == 1  # read again: set aside once
    kept.drop()
    assert spool.unreadable() == [] and not list(spool.folder.glob("2-hostile*"))


def test_a_spool_file_over_the_size_bound_is_not_read(tmp_path: Path, monkeypatch) -> None:
    spool = Spool(tmp_path / "spool")
    spool.add([_session("big")], project="p", reason="r")
    size = next(spool.folder.glob("*.json")).stat().st_size
    monkeypatch.setattr(spool_module, "MAX_BYTES", size - 1)
    assert spool.pending() == []
    assert "more than a spool file holds" in spool.unreadable()[0].reason


def _hook(env: dict[str, str], transcript: Path) -> subprocess.CompletedProcess:
    hook = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript), "session_id": "x"})
    return subprocess.run([sys.executable, "-m", "mcp_memory", "sync", "claude-code", "--hook", "--project", "h"],
                          env=env, input=hook, capture_output=True, text=True, timeout=120)


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_capture_list_and_doctor_go_on_past_a_deeply_nested_spool_file(fresh_db: str, profile, tmp_path) -> None:
    env = {**profile, "MCP_MEMORY_DSN": fresh_db}
    folder = load_settings(environ=env).data_dir / "spool"
    folder.mkdir(parents=True)
    (folder / "1-deep.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(claude_transcript())

    hooked = _hook(env, transcript)
    assert hooked.returncode == 0 and "cannot be read" in hooked.stderr, hooked.stderr
    with psycopg.connect(fresh_db) as conn:
        stored = conn.execute("SELECT count(*) FROM messages m JOIN sessions s USING (session_id) "
                              "WHERE s.project_id = 'h'").fetchone()
    assert stored is not None and stored[0] > 0  # the new turns were captured all the same

    listed = _cli(env, "spool", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["files"] == [] and [u["name"] for u in data["unreadable"]] == ["1-deep"]
    assert "nested deeper" in data["unreadable"][0]["reason"]
    text = _cli(env, "spool", "list")
    assert "1-deep: unreadable" in text.stdout and "nested deeper" in text.stdout

    doctor = _cli(env, "doctor", "--json")
    capture = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["capture"]
    assert "cannot be read" in capture["detail"] and "1-deep" in capture["detail"], capture
    assert _hook(env, transcript).returncode == 0  # and again: nothing stops
    dropped = _cli(env, "spool", "drop", "1-deep")
    assert dropped.returncode == 0 and "dropped 1-deep" in dropped.stdout, dropped.stderr
    assert json.loads(_cli(env, "spool", "list", "--json").stdout) == {"files": [], "unreadable": []}
