"""The real Gemini CLI (npm `@google/gemini-cli@0.61.0`) after `mcp-memory install gemini`: its AfterAgent
hook stores each finished turn in the database with no import by hand, a resumed session adds only its
new messages, its BeforeAgent hook shows the model the project's memory with the session's first
prompt (and a resume keeps that prompt), and with the database down Gemini still answers.

A scripted model on loopback (tests/interop/scripted_model.py) plays the model; each test has its own
HOME and database. Skipped when `gemini` is not on PATH. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from agent_runs import Home, headless, make_home, mcp_memory, missing
from scripted_model import ScriptedModel, tool_results, transcript

from mcp_memory.agents import adapter_for
from mcp_memory.config import load_settings
from mcp_memory.wiring import build

pytestmark = [pytest.mark.interop, pytest.mark.skipif(missing("gemini"), reason="gemini CLI is not on PATH")]

FIRST, SECOND = "Where does the yakledger live? Ask the memory.", "And its backups?"
ANSWER, ANSWER_2 = "The yakledger lives in PostgreSQL.", "Nightly pg_dump, kept 30 days."
CAPTURE_DELAY = 5.0  # seconds between the turn's last record and its storage, at most


def first_turn(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Turn 1: call our recall tool, then answer. Turn 2 (a resumed session): answer at once."""
    said = json.dumps(transcript(request))
    if SECOND in said:
        return [{"type": "text", "text": ANSWER_2}]
    if not tool_results(request):
        return [{"type": "tool_use", "name": "recall", "input": {"query": "yakledger"}}]
    return [{"type": "text", "text": ANSWER}]


def stored(dsn: str) -> list[dict[str, Any]]:
    """The Gemini messages in the database, in order."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT m.append_id, m.role, m.payload, m.received_at, s.meta FROM messages m "
            "JOIN sessions s USING (session_id) WHERE s.agent_source = 'gemini' ORDER BY m.session_id, m.seq"
        ).fetchall()
    return [{"append_id": a, "role": r, "payload": p, "received_at": t, "session_meta": s} for a, r, p, t, s in rows]


def wait_stored(dsn: str, count: int, data_dir: Path) -> list[dict[str, Any]]:
    deadline = time.monotonic() + CAPTURE_DELAY
    while True:
        rows = stored(dsn)
        if len(rows) >= count or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    log = data_dir / "sync.log"
    assert len(rows) >= count, f"{len(rows)} stored; sync.log: {log.read_text() if log.exists() else '(none)'}"
    return rows


def chat_file(home: Home) -> Path:
    """The session's chat file Gemini wrote last: a resume that starts in a later minute writes the
    session into a file of that minute's name, and the earlier one stays beside it."""
    files = sorted((Path(home.env["HOME"]) / ".gemini" / "tmp").rglob("chats/session-*.jsonl"),
                   key=lambda p: p.stat().st_mtime)
    assert files and len({f.stem.rsplit("-", 1)[-1] for f in files}) == 1, files  # one session
    return files[-1]


def test_the_hook_stores_each_turn_and_a_resumed_turn_adds_only_new_messages(tmp_path, settings, profile):
    home = make_home("gemini", tmp_path / "gemini", tmp_path / "work", settings.dsn, profile)
    installed = mcp_memory(home.env, home.work, "install", "gemini").stdout
    assert "set AfterAgent hook (captures the new messages of each finished turn" in installed, installed
    assert "set BeforeAgent hook" in installed and "sync gemini --hook" in installed
    with ScriptedModel(first_turn) as model:
        run = headless(home, model.url, FIRST)
        assert ANSWER in run.stdout
        path = chat_file(home)
        full = adapter_for("gemini").read([path])[0]
        rows = wait_stored(settings.dsn, len(full.messages), settings.data_dir)
        # no import by hand: the AfterAgent hook stored the whole turn, as a full read sees it
        assert [r["append_id"] for r in rows] == [m.append_id for m in full.messages]
        last_record = max(m.created_at for m in full.messages if m.created_at)
        assert all((r["received_at"] - last_record).total_seconds() < CAPTURE_DELAY for r in rows[-2:])
        by_role = [(r["role"], r["payload"]) for r in rows]
        setup = by_role[0][1]
        assert by_role[0][0] == "user" and setup["metadata"]["scaffold"] == "environment"
        assert "This is the Gemini CLI" in json.dumps(setup["content"])
        call = next(p for role, p in by_role if role == "assistant" and p.get("tool_calls"))
        assert call["tool_calls"][0]["function"]["name"] == "mcp_mcp-memory_recall"
        assert by_role[-1] == ("assistant", by_role[-1][1]) and by_role[-1][1]["content"] == ANSWER
        assert rows[0]["session_meta"]["title"] == FIRST

        resumed = headless(home, model.url, SECOND, resume=full.native_id)
        assert ANSWER_2 in resumed.stdout
    again = adapter_for("gemini").read([chat_file(home)])[0]
    rows_2 = wait_stored(settings.dsn, len(rows) + 2, settings.data_dir)
    new = rows_2[len(rows):]
    assert [(r["role"], r["payload"]["content"]) for r in new] == [("user", SECOND), ("assistant", ANSWER_2)]
    assert [r["append_id"] for r in rows_2[: len(rows)]] == [r["append_id"] for r in rows]
    assert {r["append_id"] for r in rows_2} == {m.append_id for m in again.messages}


def test_the_recall_hook_gives_the_model_the_projects_memory_with_the_first_prompt(tmp_path, settings, profile):
    home = make_home("gemini", tmp_path / "gemini", tmp_path / "work", settings.dsn, profile)
    mcp_memory(home.env, home.work, "install", "gemini")
    svc = build(replace(load_settings(dsn=settings.dsn, environ=profile)))
    try:
        sid = svc.create_session(home.work.name, {"title": "ledger talk"}).session_id
        svc.record_decision(sid, "database", "quokkaledger stays in PostgreSQL", rationale="one database to run")
    finally:
        svc.db.close()
    with ScriptedModel(lambda request: [{"type": "text", "text": "Hello."}]) as model:
        run = headless(home, model.url, "Say hello.")
        first = [text for kind, text in transcript(model.main_requests()[0]) if kind == "user"]
        assert first[-2] == "Say hello." and first[-1].startswith("<hook_context>")
        assert "quokkaledger stays in PostgreSQL" in first[-1]
        session_id = json.loads(run.stdout)["session_id"]
        headless(home, model.url, "Say it again.", resume=session_id)
        resumed = [text for kind, text in transcript(model.main_requests()[-1]) if kind == "user"]
    # resumed: Gemini still shows its model the first prompt, and the recall is not added again
    assert resumed[-1] == "Say it again." and "Say hello." in resumed
    assert sum(text.startswith("<hook_context>") for text in resumed) == 1
    # captured: the recall block is a marked part of the prompt, the title is what the user typed
    rows = [r for r in wait_stored(settings.dsn, 5, settings.data_dir) if r["role"] == "user"]
    parts = rows[1]["payload"]["content"]
    assert [p.get("scaffold") for p in parts] == [None, "reminder"] and parts[0]["text"] == "Say hello."
    assert "".join(p["text"] for p in parts) == "".join(first[-2:])
    assert rows[-1]["payload"]["content"] == "Say it again."
    assert rows[-1]["session_meta"]["title"] == "Say hello."
    assert isinstance(rows[-1]["received_at"], datetime)


def test_with_the_database_down_gemini_still_answers_and_the_turn_waits_in_the_spool(tmp_path, settings, profile):
    home = make_home("gemini", tmp_path / "gemini", tmp_path / "work", settings.dsn, profile)
    down = {**home.env, "MCP_MEMORY_DSN": "postgresql://nobody@127.0.0.1:1/nothing"}
    mcp_memory(down, home.work, "install", "gemini")  # the hooks now name a database that is not there
    started = time.monotonic()
    with ScriptedModel(lambda request: [{"type": "text", "text": "Still here."}]) as model:
        run = headless(replace(home, env=down), model.url, "Are you there?")
    assert "Still here." in run.stdout and time.monotonic() - started < 120
    assert stored(settings.dsn) == []
    assert list((settings.data_dir / "spool").iterdir()), "the turn was not spooled"
    # the next sync that reaches the database delivers the spooled turn first
    mcp_memory(home.env, home.work, "sync", "gemini", "--path", str(chat_file(home)))
    texts = [json.dumps(r["payload"]) for r in stored(settings.dsn)]
    assert any("Are you there?" in t for t in texts) and any("Still here." in t for t in texts)
