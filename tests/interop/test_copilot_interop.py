"""The real GitHub Copilot CLI (npm `@github/copilot@1.0.102`, BYOK and offline: no GitHub login)
after `mcp-memory install copilot`, against the scripted model on loopback:

- its agentStop hook stores a run in the database within seconds of the CLI exiting, with no import
  by hand, and a resumed run adds only its new messages (the MCP server is offered and called too);
- with the database down Copilot still answers, and the run waits in the spool;
- its sessionStart hook puts the project's recall into the model's first request, once per run;
- a Claude Code session exported with `--install` is resumed by the printed line with the whole
  history and none of Claude Code's scaffolding, captured as a fork with only the new turns, and
  relayed back to Claude Code, which receives everything and none of Copilot's scaffolding.

Skipped when `copilot` (or, for the relay, `claude`) is not on PATH. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from agent_runs import Home, headless, make_home, mcp_memory, missing
from scripted_model import ScriptedModel, tool_results, transcript

from mcp_memory.agents import adapter_for
from mcp_memory.config import load_settings
from mcp_memory.wiring import build

pytestmark = [pytest.mark.interop, pytest.mark.skipif(missing("copilot"), reason="copilot CLI is not on PATH")]

CAPTURE_DELAY = 10.0  # seconds between the CLI exiting and its run being in the database, at most
FIRST, SECOND = "Where does the emuledger live? Ask the memory.", "And its backups?"
ANSWER, ANSWER_2 = "The emuledger lives in PostgreSQL.", "Nightly pg_dump, kept 30 days."
# What Copilot puts into its own sessions and requests beside the conversation
COPILOT_MARKERS = ["You are the GitHub Copilot CLI", "<current_datetime>"]
CLAUDE_MARKERS = ["<system-reminder>", "Caveat: The messages below", "<command-name>", "<local-command-stdout>"]


def stored(dsn: str, agent: str = "copilot") -> list[dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT m.append_id, m.role, m.payload, s.session_id, s.parent_session_id FROM messages m "
            "JOIN sessions s USING (session_id) WHERE s.agent_source = %s ORDER BY m.session_id, m.seq", (agent,)
        ).fetchall()
    return [{"append_id": a, "role": r, "payload": p, "session_id": s, "parent": ps} for a, r, p, s, ps in rows]


def wait_stored(dsn: str, count: int, data_dir: Path, agent: str = "copilot") -> list[dict[str, Any]]:
    deadline = time.monotonic() + CAPTURE_DELAY
    while True:
        rows = stored(dsn, agent)
        if len(rows) >= count or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    log = data_dir / "sync.log"
    assert len(rows) >= count, f"{len(rows)} stored; sync.log: {log.read_text() if log.exists() else '(none)'}"
    return rows


def events_file(home: Home, session_id: str) -> Path:
    return Path(home.env["HOME"]) / ".copilot" / "session-state" / session_id / "events.jsonl"


def resumed_id(run_stderr: str) -> str:
    """The id of Copilot's closing `Resume  copilot --resume=ID` line (stdout or stderr)."""
    word = next(w for w in run_stderr.split() if w.startswith("--resume="))
    return word.split("=", 1)[1]


def memory_turn(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Turn 1: call our recall tool, then answer. Turn 2 (resumed): answer at once."""
    if SECOND in json.dumps(transcript(request)):
        return [{"type": "text", "text": ANSWER_2}]
    if not tool_results(request):
        return [{"type": "tool_use", "name": "recall", "input": {"query": "emuledger"}}]
    return [{"type": "text", "text": ANSWER}]


def test_a_run_is_stored_within_seconds_of_exit_and_a_resume_adds_only_new_messages(tmp_path, settings, profile):
    home = make_home("copilot", tmp_path / "copilot", tmp_path / "work", settings.dsn, profile)
    installed = mcp_memory(home.env, home.work, "install", "copilot").stdout
    assert "added MCP server mcp-memory" in installed and "set agentStop hook" in installed, installed
    with ScriptedModel(memory_turn) as model:
        run = headless(home, model.url, FIRST)
        exited = time.monotonic()
        requests = model.main_requests()
        session_id = resumed_id(run.stdout + run.stderr)
        full = adapter_for("copilot").read([events_file(home, session_id)])[0]
        rows = wait_stored(settings.dsn, len(full.messages), settings.data_dir)
        assert time.monotonic() - exited < CAPTURE_DELAY
        # the model was offered our tool under Copilot's name, and its result came back
        assert "mcp-memory-recall" in json.dumps(requests[0]["tools"])
        assert tool_results(requests[-1]), transcript(requests[-1])
        assert [r["append_id"] for r in rows] == [m.append_id for m in full.messages]
        roles = [(r["role"], r["payload"].get("metadata", {}).get("scaffold")) for r in rows]
        assert ("system", "instructions") in roles  # Copilot's system prompt, marked
        call = next(r["payload"] for r in rows if r["payload"].get("tool_calls"))
        assert call["tool_calls"][0]["function"]["name"] == "mcp-memory-recall"
        assert rows[-1]["payload"]["content"] == ANSWER

        again = headless(home, model.url, SECOND, resume=session_id)
        assert ANSWER_2 in again.stdout
    rows_2 = wait_stored(settings.dsn, len(rows) + 2, settings.data_dir)
    new = rows_2[len(rows):]
    assert [(r["role"], r["payload"]["content"]) for r in new if r["role"] != "system"] == [
        ("user", SECOND), ("assistant", ANSWER_2)]
    assert [r["append_id"] for r in rows_2[: len(rows)]] == [r["append_id"] for r in rows]
    everything = adapter_for("copilot").read([events_file(home, session_id)])[0]
    assert [r["append_id"] for r in rows_2] == [m.append_id for m in everything.messages]  # exactly once


def test_with_the_database_down_copilot_still_answers_and_the_run_waits_in_the_spool(tmp_path, settings, profile):
    home = make_home("copilot", tmp_path / "copilot", tmp_path / "work", settings.dsn, profile)
    down = {**home.env, "MCP_MEMORY_DSN": "postgresql://nobody@127.0.0.1:1/nothing"}
    mcp_memory(down, home.work, "install", "copilot")
    with ScriptedModel(lambda request: [{"type": "text", "text": "Still here."}]) as model:
        run = headless(replace(home, env=down), model.url, "Are you there?")
    assert "Still here." in run.stdout
    assert stored(settings.dsn) == []
    assert list((settings.data_dir / "spool").iterdir()), "the run was not spooled"
    path = events_file(home, resumed_id(run.stdout + run.stderr))
    mcp_memory(home.env, home.work, "sync", "copilot", "--path", str(path))
    texts = [json.dumps(r["payload"]) for r in stored(settings.dsn)]
    assert any("Are you there?" in t for t in texts) and any("Still here." in t for t in texts)
    assert len(texts) == len(adapter_for("copilot").read([path])[0].messages)  # the spool and the sync: once


def test_the_recall_reaches_the_models_first_request_once_per_run(tmp_path, settings, profile):
    home = make_home("copilot", tmp_path / "copilot", tmp_path / "work", settings.dsn, profile)
    mcp_memory(home.env, home.work, "install", "copilot")
    svc = build(replace(load_settings(dsn=settings.dsn, environ=profile)))
    try:
        sid = svc.create_session(home.work.name, {"title": "ledger talk"}).session_id
        svc.record_decision(sid, "database", "numbatledger stays in PostgreSQL", rationale="one database to run")
    finally:
        svc.db.close()
    with ScriptedModel(lambda request: [{"type": "text", "text": "Hello."}]) as model:
        run = headless(home, model.url, "Say hello.")
        first = [text for kind, text in transcript(model.main_requests()[0]) if kind == "user"]
        assert any("numbatledger stays in PostgreSQL" in text for text in first[:-1]), first
        assert first[-1].endswith("Say hello.")
        headless(home, model.url, "Say it again.", resume=resumed_id(run.stdout + run.stderr))
        resumed = [text for kind, text in transcript(model.main_requests()[-1]) if kind == "user"]
    assert resumed[-1].endswith("Say it again.") and any(t.endswith("Say hello.") for t in resumed)
    # Copilot keeps no hook context in the session, and its resume fires sessionStart again: the
    # resumed run gets the recall once, fresh, not a copy per earlier run
    assert sum("numbatledger" in text for text in resumed) == 1


# ---------------------------------------------------------------- Claude Code → Copilot → Claude Code

def relay_script(notes: Path):
    """Prompt k → answer k; the first prompt (in Claude Code) reads `notes` with the Read tool."""

    def script(request: dict[str, Any]) -> list[dict[str, Any]]:
        flat = transcript(request)
        asked = [text for kind, text in flat if kind == "user" and "relayprompt" in text]
        if not asked:
            return [{"type": "text", "text": "no prompt"}]
        k = int(asked[-1].split("relayprompt", 1)[1][0])
        position = max(i for i, (kind, text) in enumerate(flat) if kind == "user" and f"relayprompt{k}" in text)
        if k == 0 and not any(kind == "tool_result" for kind, _ in flat[position:]):
            return [{"type": "tool_use", "name": "Read", "input": {"file_path": str(notes)}}]
        return [{"type": "text", "text": f"relayanswer{k}: the code word is wombatword."}]

    return script


def in_order(flat: list[tuple[str, str]], expected: list[tuple[str, str]]) -> bool:
    position = 0
    for kind, fragment in expected:
        while position < len(flat) and not (flat[position][0] == kind and fragment in flat[position][1]):
            position += 1
        if position == len(flat):
            return False
        position += 1
    return True


def printed_argv(printed: str) -> tuple[Path, list[str]]:
    words = shlex.split(printed)
    assert words[0] == "cd" and words[2] == "&&", printed
    return Path(words[1]), words[3:]


def carrying(flat: list[tuple[str, str]], markers: list[str]) -> list[tuple[str, str]]:
    return [(kind, text[:200]) for kind, text in flat
            if kind in ("user", "assistant", "tool_result") and any(m in text for m in markers)]


@pytest.mark.skipif(missing("claude-code"), reason="claude CLI is not on PATH")
def test_relay_from_claude_code_into_copilot_and_back(tmp_path, settings, profile, service):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text("The code word is wombatword.\n")
    script = relay_script(work / "notes.md")
    claude = make_home("claude-code", tmp_path / "claude", work, settings.dsn, profile)
    with ScriptedModel(script) as model:
        headless(claude, model.url, "relayprompt0: read notes.md and tell me the code word.")
    (imported,) = json.loads(mcp_memory(claude.env, work, "import", "claude-code",
                                        str(Path(claude.env["HOME"]) / ".claude" / "projects"), "--project",
                                        "relay", "--json").stdout)["sessions"]
    expected = [("user", "relayprompt0"), ("tool_call", "notes.md"), ("tool_result", "wombatword"),
                ("assistant", "relayanswer0")]

    copilot = make_home("copilot", tmp_path / "copilot", work, settings.dsn, profile)
    mcp_memory(copilot.env, work, "install", "copilot")  # capture hooks: the continued session comes back by itself
    exported = json.loads(mcp_memory(copilot.env, work, "export", imported["session_id"], "--to", "copilot",
                                     "--install", "--json").stdout)
    assert exported["relay"], exported
    cwd, argv = printed_argv(exported["resume_command"])
    assert cwd == work and argv == ["copilot", f"--resume={exported['native_id']}"]
    with ScriptedModel(script) as model:
        headless(copilot, model.url, "", argv=[*argv, "-p", "relayprompt1: the code word again?", "--allow-all-tools"])
        flat = transcript(model.main_requests()[0])
    expected.append(("user", "relayprompt1"))
    assert in_order(flat, expected), flat
    assert not carrying(flat, CLAUDE_MARKERS), carrying(flat, CLAUDE_MARKERS)
    expected.append(("assistant", "relayanswer1"))

    rows = wait_stored(settings.dsn, 2, settings.data_dir)  # the agentStop hook, no import
    (fork_id,) = {r["session_id"] for r in rows}
    fork = service.get_session(fork_id)
    assert fork.parent_session_id == imported["session_id"] and fork.fork_seq
    own = json.dumps([r["payload"] for r in rows])
    assert "relayprompt1" in own and "relayanswer1" in own and "relayprompt0" not in own

    back_home = make_home("claude-code", tmp_path / "claude-back", work, settings.dsn, profile)
    back = json.loads(mcp_memory(back_home.env, work, "export", fork_id, "--to", "claude-code", "--install",
                                 "--json").stdout)
    cwd, argv = printed_argv(back["resume_command"])
    with ScriptedModel(script) as model:
        headless(back_home, model.url, "", argv=[*argv, "-p", "relayprompt2: and once more?", "--output-format",
                                                 "json"])
        flat = transcript(model.main_requests()[0])
    expected.append(("user", "relayprompt2"))
    assert in_order(flat, expected), flat
    assert not carrying(flat, COPILOT_MARKERS), carrying(flat, COPILOT_MARKERS)
