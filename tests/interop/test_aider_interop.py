"""The real Aider (PyPI `aider-chat==0.86.2`, in a venv of its own) after `mcp-memory install aider`:
`mcp-memory watch aider` stores each run from `.aider.chat.history.md` with no import by hand and
keeps the recall file filled that `install` put into Aider's `read:`, so the project's memory is in
the model's first request; a run continued with `--restore-chat-history` adds only its new turns.

A scripted model on loopback (tests/interop/scripted_model.py) plays the model: Aider sends no tools,
so the script answers every request. Skipped when `aider` is not on PATH. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from typing import Any

import psycopg
import pytest
from agent_runs import Home, headless, make_home, mcp_memory, missing
from scripted_model import ScriptedModel, transcript

pytestmark = [pytest.mark.interop, pytest.mark.skipif(missing("aider"), reason="aider is not on PATH")]

FIRST, SECOND = "Where does the yakledger live?", "And its backups?"
ANSWER, ANSWER_2 = "The yakledger lives in PostgreSQL.", "Nightly pg_dump, kept 30 days."
CAPTURE_DELAY = 10.0  # seconds between Aider's exit and the run being in the database, at most
DECISION = "The yakledger stays in PostgreSQL (one database to run)"


def answer(request: dict[str, Any]) -> list[dict[str, Any]]:
    said = [text for kind, text in transcript(request) if kind == "user"]
    return [{"type": "text", "text": ANSWER_2 if SECOND in said[-1] else ANSWER}]


def stored(dsn: str) -> list[tuple[str, dict[str, Any], str]]:
    """The Aider messages in the database, in order: (role, payload, session id)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT m.role, m.payload, m.session_id FROM messages m JOIN sessions s USING (session_id) "
            "WHERE s.agent_source = 'aider' ORDER BY m.session_id, m.seq").fetchall()
    return [(role, payload, str(session)) for role, payload, session in rows]


def wait_for(dsn: str, text: str, since: float) -> list[tuple[str, dict[str, Any], str]]:
    while True:
        rows = stored(dsn)
        if any(text in json.dumps(payload) for _, payload, _ in rows):
            return rows
        assert time.monotonic() - since < CAPTURE_DELAY, f"{text!r} not stored {CAPTURE_DELAY}s after Aider exited"
        time.sleep(0.2)


def start_watcher(home: Home) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "mcp_memory", "watch", "aider", "--interval", "0.3"],
                            cwd=home.work, env={**home.env, "PWD": str(home.work)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stop(watcher: subprocess.Popen[str]) -> str:
    watcher.send_signal(signal.SIGTERM)
    out, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, err
    return out + err


def test_watch_stores_each_run_and_recall_reaches_the_first_request(tmp_path, settings, profile, service) -> None:
    home = make_home("aider", tmp_path / "aider", tmp_path / "yakproj", settings.dsn, profile)
    sid = service.create_session("yakproj", {"title": "earlier talk"}).session_id
    service.record_decision(sid, "database", DECISION)
    installed = mcp_memory(home.env, home.work, "install", "aider", "--scope", "project").stdout
    assert ".aider.mcp-memory.md in read" in installed and "watch aider" in installed, installed
    watcher = start_watcher(home)
    try:
        recall = home.work / ".aider.mcp-memory.md"
        deadline = time.monotonic() + 30
        while not (recall.exists() and "yakledger" in recall.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        with ScriptedModel(answer, toolless=True) as model:
            headless(home, model.url, FIRST)
            exited = time.monotonic()
            first = model.requests[0]
        said = json.dumps(first["messages"])
        assert DECISION in said and "earlier sessions" in said, said[:3000]  # the read-only recall file
        rows = wait_for(settings.dsn, ANSWER, exited)
        texts = [(role, payload.get("content")) for role, payload, _ in rows if not payload["metadata"].get("scaffold")]
        assert texts == [("user", FIRST), ("assistant", ANSWER)], texts
        assert any(payload["metadata"].get("scaffold") == "environment" for _, payload, _ in rows)

        with ScriptedModel(answer, toolless=True) as model:
            headless(home, model.url, SECOND, argv=["aider", "--restore-chat-history"])
            exited = time.monotonic()
            resumed = transcript(model.requests[0])
        assert ("assistant", ANSWER) in [(k, t.strip()) for k, t in resumed], resumed  # Aider restored turn 1
        rows = wait_for(settings.dsn, ANSWER_2, exited)
    finally:
        log = stop(watcher)
    texts = [(role, payload.get("content")) for role, payload, _ in rows if not payload["metadata"].get("scaffold")]
    assert texts == [("user", FIRST), ("assistant", ANSWER), ("user", SECOND), ("assistant", ANSWER_2)], (texts, log)
    assert len({session for _, _, session in rows}) == 1  # one history file, one session, nothing twice
    assert service.get_session(rows[0][2]).project_id == "yakproj"


def test_with_the_database_down_aider_still_answers_and_the_run_is_stored_later(tmp_path, settings, profile) -> None:
    home = make_home("aider", tmp_path / "aider", tmp_path / "yakproj", settings.dsn, profile)
    down = {**home.env, "MCP_MEMORY_DSN": "postgresql://nobody@127.0.0.1:1/none"}
    with ScriptedModel(answer, toolless=True) as model:
        headless(home, model.url, FIRST)
    spooled = subprocess.run([sys.executable, "-m", "mcp_memory", "watch", "aider", "--once"], cwd=home.work,
                             env={**down, "PWD": str(home.work)}, capture_output=True, text=True, timeout=120)
    assert spooled.returncode == 0 and "spool" in spooled.stderr, spooled.stderr
    assert not stored(settings.dsn)
    mcp_memory(home.env, home.work, "watch", "aider", "--once")
    texts = [(role, payload.get("content")) for role, payload, _ in stored(settings.dsn)
             if not payload["metadata"].get("scaffold")]
    assert texts == [("user", FIRST), ("assistant", ANSWER)], texts
    count = len(stored(settings.dsn))
    (home.work / ".aider.chat.history.md").touch()  # a change without news: the watcher reads, stores nothing
    mcp_memory(home.env, home.work, "watch", "aider", "--once")
    assert len(stored(settings.dsn)) == count

