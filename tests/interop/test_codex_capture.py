"""The real Codex CLI, after `mcp-memory install codex`, captures its own turns into the database and
starts each thread with the project's recall — with no import run by hand.

`install` writes a Stop hook (`sync codex --hook`) and a SessionStart hook (`recall --hook --agent
codex`) into a throwaway CODEX_HOME's config.toml and records Codex's trust for them through
`codex app-server`. The scripted model (tests/interop/scripted_model.py, Responses API) answers each
turn; the test then reads the database. Needs `codex` (npm `@openai/codex@0.169.0`) on PATH; skipped
otherwise. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import time
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from agent_runs import headless, make_home, mcp_memory, missing
from scripted_model import ScriptedModel

from mcp_memory.agents import adapter_for
from mcp_memory.agents.codex.trust import _hooks_list

pytestmark = [pytest.mark.interop, pytest.mark.skipif(missing("codex"), reason="codex CLI is not on PATH")]

FIRST, SECOND = "Which ledger do we keep?", "And where does it live?"
ANSWERS = {FIRST: "The quokka ledger.", SECOND: "In PostgreSQL."}
CAPTURED_WITHIN = 5.0  # seconds after the turn ended


def answer(request: dict[str, Any]) -> list[dict[str, Any]]:
    text = json.dumps(request.get("input"))
    reply = ANSWERS[SECOND] if SECOND in text else ANSWERS[FIRST]
    return [{"type": "text", "text": reply}]


def stored(dsn: str) -> list[tuple[str, str, str, Any]]:
    """(session_id, append_id, role, payload) of every stored Codex message, in order."""
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT m.session_id, m.append_id, m.role, m.payload FROM messages m JOIN sessions s USING (session_id)"
            " WHERE s.agent_source = 'codex' ORDER BY m.session_id, m.seq").fetchall()


def wait_for(dsn: str, text: str, since: float) -> list[tuple[str, str, str, Any]]:
    while True:
        rows = stored(dsn)
        if any(text in json.dumps(row[3]) for row in rows):
            return rows
        assert time.monotonic() - since < CAPTURED_WITHIN, f"{text!r} not stored within {CAPTURED_WITHIN} s"
        time.sleep(0.2)


def seed_memory(settings, profile: dict[str, str], project: str) -> None:
    from mcp_memory.config import load_settings
    from mcp_memory.wiring import build

    svc = build(replace(load_settings(dsn=settings.dsn, environ=profile)))
    try:
        sid = svc.create_session(project, {"title": "ledger talk"}).session_id
        svc.record_decision(sid, "database", "quokkaledger stays in PostgreSQL", rationale="one database to run")
    finally:
        svc.db.close()


@pytest.fixture
def home(tmp_path: Path, settings, profile: dict[str, str]):
    home = make_home("codex", tmp_path / "codex", tmp_path / "work", settings.dsn, profile)
    done = mcp_memory(home.env, home.work, "install", "codex")
    assert "Stop hook (after every turn" in done.stdout and "trusted our hooks for Codex" in done.stdout, done.stdout
    return home


def test_turns_are_captured_by_the_hook_and_recall_starts_the_thread(home, settings, profile) -> None:
    seed_memory(settings, profile, home.work.name)
    with ScriptedModel(answer) as model:
        run = headless(home, model.url, FIRST)
        ended = time.monotonic()
        rows = wait_for(settings.dsn, ANSWERS[FIRST], ended)
        first_requests = model.main_requests()
        thread = next(json.loads(line)["thread_id"] for line in run.stdout.splitlines()
                      if '"thread.started"' in line)

        # the SessionStart hook put the project's recall into what the model read at the first turn
        assert "quokkaledger stays in PostgreSQL" in json.dumps(first_requests[0], ensure_ascii=False)

        # what was captured is the whole first turn, Codex's injected context marked as scaffolding
        assert len({row[0] for row in rows}) == 1
        texts = [json.dumps(row[3], ensure_ascii=False) for row in rows]
        assert any(FIRST in t for t in texts)
        marked = [row[3]["metadata"].get("scaffold") for row in rows if row[2] in ("system", "user")]
        assert "environment" in marked and None in marked
        recall_rows = [row for row in rows if "quokkaledger" in json.dumps(row[3])]
        assert recall_rows and all(row[3]["metadata"].get("scaffold") for row in recall_rows)

        headless(home, model.url, SECOND, resume=thread)
        rows2 = wait_for(settings.dsn, ANSWERS[SECOND], time.monotonic())

    # the second turn only added its own messages: the first turn's rows are unchanged, nothing twice
    assert rows2[:len(rows)] == rows
    ids = [row[1] for row in rows2]
    assert len(ids) == len(set(ids)) and len(rows2) > len(rows)
    (rollout,) = Path(home.env["CODEX_HOME"], "sessions").rglob(f"*{thread}.jsonl")
    (full,) = adapter_for("codex").read([rollout])
    assert ids == [m.append_id for m in full.messages]  # exactly what one full read of the rollout gives


def test_install_trusts_only_its_own_hooks_and_uninstall_removes_them(tmp_path: Path, settings, profile) -> None:
    """With a Stop hook of the user's own first, Codex itself reports ours trusted (their trust keys
    hold our positions) and the user's hook untouched; uninstall takes ours and their trust away."""
    home = make_home("codex", tmp_path / "codex", tmp_path / "work", settings.dsn, profile)
    config = Path(home.env["CODEX_HOME"]) / "config.toml"
    own = '\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = "command"\ncommand = "echo my own hook"\n'
    config.write_text(config.read_text() + own)
    done = mcp_memory(home.env, home.work, "install", "codex")
    assert "trusted our hooks for Codex" in done.stdout, done.stdout
    status = {hook["command"]: hook["trustStatus"] for hook in _hooks_list(
        "codex", home.work, {**home.env, "PATH": home.env["PATH"]})}
    ours = {command: state for command, state in status.items() if "mcp-memory" in command}
    assert sorted(ours.values()) == ["trusted", "trusted"] and len(ours) == 2
    assert status["echo my own hook"] == "untrusted"
    assert "nothing to change" in mcp_memory(home.env, home.work, "install", "codex").stdout
    mcp_memory(home.env, home.work, "install", "codex", "--uninstall")
    data = tomllib.loads(config.read_text())
    assert data["hooks"] == {"Stop": [{"hooks": [{"type": "command", "command": "echo my own hook"}]}]}
    assert "mcp-memory" not in data.get("mcp_servers", {})


def test_an_unreachable_database_neither_fails_nor_holds_up_the_turn(tmp_path: Path, settings, profile) -> None:
    """The Stop hook with a database that does not answer: the turn ends normally and in time, the
    messages wait in the spool, and the next sync delivers them once — nothing read twice."""
    dead = f"host={tmp_path / 'no-server'} dbname=nothing user=nobody"
    home = make_home("codex", tmp_path / "codex", tmp_path / "work", dead, profile)
    mcp_memory(home.env, home.work, "install", "codex")
    with ScriptedModel(answer) as model:
        started = time.monotonic()
        run = headless(home, model.url, FIRST)
        assert time.monotonic() - started < 30
    assert ANSWERS[FIRST] in run.stdout
    spooled = list(Path(profile["MCP_MEMORY_HOME"]).rglob("spool/*.json"))
    assert len(spooled) == 1 and ANSWERS[FIRST] in spooled[0].read_text()
    (rollout,) = Path(home.env["CODEX_HOME"], "sessions").rglob("rollout-*.jsonl")
    live = {**home.env, "MCP_MEMORY_DSN": settings.dsn}
    mcp_memory(live, home.work, "sync", "codex", "--path", str(rollout))
    mcp_memory(live, home.work, "sync", "codex", "--path", str(rollout))
    rows = stored(settings.dsn)
    (full,) = adapter_for("codex").read([rollout])
    assert [row[1] for row in rows] == [m.append_id for m in full.messages]
