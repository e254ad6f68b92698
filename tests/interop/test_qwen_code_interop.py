"""The real Qwen Code (npm `@qwen-code/qwen-code@0.24.4`) after `mcp-memory install qwen-code`: its Stop
hook stores each finished turn in the database with no import by hand, a resumed session adds only its
new messages, its SessionStart hook puts the project's memory into the first request, with the database
down Qwen Code still answers and the turn waits in the spool, and a session relayed from Claude Code
into Qwen Code and back reaches both real CLIs' models whole, without another agent's scaffolding.

A scripted model on loopback (tests/interop/scripted_model.py) plays the model, over Qwen Code's
OpenAI-compatible provider; each test has its own HOME and database. Skipped when `qwen` (or, for the
relay, `claude`) is not on PATH. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from agent_runs import Home, headless, make_home, mcp_memory, missing
from scripted_model import ScriptedModel, tool_names, tool_results, transcript

from mcp_memory.agents import adapter_for
from mcp_memory.config import load_settings
from mcp_memory.wiring import build

pytestmark = [pytest.mark.interop, pytest.mark.skipif(missing("qwen-code"), reason="qwen is not on PATH")]

CAPTURE_DELAY = 10.0  # seconds between the CLI's exit and the turn being in the database, at most
FIRST, SECOND = "Read notes.md and tell me the code word.", "And what was it again?"
ANSWER, ANSWER_2 = "The code word is quokkaword.", "Still quokkaword."
# What each agent injects into its own sessions as turns: none of it may reach another agent's model
FOREIGN = {"claude-code": ["Caveat: The messages below", "<command-name>", "<local-command-stdout>"],
           "qwen-code": ["<qwen:", "This is the Qwen Code"]}


def reading_script(notes: Path):
    """The first prompt reads `notes` with whatever read tool the agent offers, then answers."""

    def script(request: dict[str, Any]) -> list[dict[str, Any]]:
        said = json.dumps(transcript(request))
        if SECOND in said:
            return [{"type": "text", "text": ANSWER_2}]
        if not tool_results(request):
            name = "read_file" if "read_file" in tool_names(request) else "Read"
            return [{"type": "tool_use", "name": name, "input": {"file_path": str(notes)}}]
        return [{"type": "text", "text": ANSWER}]

    return script


def stored(dsn: str, agent: str = "qwen-code") -> list[dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT m.append_id, m.role, m.payload, m.received_at, s.session_id, s.meta FROM messages m "
            "JOIN sessions s USING (session_id) WHERE s.agent_source = %s ORDER BY s.created_at, m.seq", (agent,),
        ).fetchall()
    return [{"append_id": a, "role": r, "payload": p, "received_at": t, "session_id": sid, "session_meta": meta}
            for a, r, p, t, sid, meta in rows]


def wait_stored(dsn: str, count: int, data_dir: Path, agent: str = "qwen-code") -> list[dict[str, Any]]:
    deadline = time.monotonic() + CAPTURE_DELAY
    while True:
        rows = stored(dsn, agent)
        if len(rows) >= count or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    log = data_dir / "sync.log"
    assert len(rows) >= count, f"{len(rows)} of {count} stored; sync.log: {log.read_text() if log.exists() else '(none)'}"
    return rows


def said(messages: list[Any]) -> list[str]:
    """The append_ids of what was said (not Qwen Code's telemetry records, which may follow the Stop hook)."""
    return [m.append_id for m in messages if not m.metadata.get("scaffold")]


def chat_file(home: Home) -> Path:
    files = sorted((Path(home.env["HOME"]) / ".qwen" / "projects").rglob("chats/*.jsonl"))
    assert len(files) == 1, files
    return files[0]


def test_the_stop_hook_stores_each_turn_and_a_resumed_turn_adds_only_new_messages(tmp_path, settings, profile):
    home = make_home("qwen-code", tmp_path / "qwen", tmp_path / "work", settings.dsn, profile)
    (home.work / "notes.md").write_text("The code word is quokkaword.\n")
    installed = mcp_memory(home.env, home.work, "install", "qwen-code").stdout
    assert "set Stop hook" in installed and "sync qwen-code --hook" in installed, installed
    with ScriptedModel(reading_script(home.work / "notes.md")) as model:
        run = headless(home, model.url, FIRST)
        exited = time.monotonic()
        assert ANSWER in run.stdout
        # the model really saw the file through Qwen Code's own tool
        assert "quokkaword" in tool_results(model.main_requests()[-1])[0]["text"]
        full = adapter_for("qwen-code").read([chat_file(home)])[0]
        rows = wait_stored(settings.dsn, len(said(full.messages)), settings.data_dir)
        assert time.monotonic() - exited < CAPTURE_DELAY
        ids = [r["append_id"] for r in rows]  # no import by hand: stored as a full read sees the file
        assert ids == [m.append_id for m in full.messages][: len(ids)] and set(said(full.messages)) <= set(ids)
        turns = [(r["role"], r["payload"].get("content")) for r in rows if not r["payload"]["metadata"].get("scaffold")]
        assert turns[0] == ("user", FIRST) and turns[-1] == ("assistant", ANSWER)
        assert any(r["role"] == "tool" and "quokkaword" in json.dumps(r["payload"]) for r in rows)
        assert rows[0]["session_meta"]["title"] == FIRST

        resumed = headless(home, model.url, SECOND, resume=full.native_id)
        assert ANSWER_2 in resumed.stdout
    again = adapter_for("qwen-code").read([chat_file(home)])[0]
    rows_2 = wait_stored(settings.dsn, len(rows) + 2, settings.data_dir)
    ids = [r["append_id"] for r in rows_2]  # each message once, in the file's order
    assert ids == [m.append_id for m in again.messages][: len(ids)] and set(said(again.messages)) <= set(ids)
    new = [(r["role"], r["payload"]["content"]) for r in rows_2[len(rows):] if not r["payload"]["metadata"].get("scaffold")]
    assert new == [("user", SECOND), ("assistant", ANSWER_2)]
    assert len({r["session_id"] for r in rows_2}) == 1


def test_the_session_start_hook_puts_the_projects_memory_into_the_first_request(tmp_path, settings, profile):
    home = make_home("qwen-code", tmp_path / "qwen", tmp_path / "orders-service", settings.dsn, profile)
    mcp_memory(home.env, home.work, "install", "qwen-code")
    svc = build(replace(load_settings(dsn=settings.dsn, environ=profile)))
    try:
        sid = svc.create_session(home.work.name, {"title": "ledger talk"}).session_id
        svc.record_decision(sid, "database", "quokkaledger stays in PostgreSQL", rationale="one database to run")
    finally:
        svc.db.close()
    with ScriptedModel(lambda request: [{"type": "text", "text": "Hello."}]) as model:
        headless(home, model.url, "Say hello.")
        first = model.main_requests()[0]
    system = [m for m in first["messages"] if m["role"] == "system"]
    assert "quokkaledger stays in PostgreSQL" in json.dumps(system, ensure_ascii=False)
    assert "Say hello." in json.dumps(first["messages"][-1], ensure_ascii=False)
    # the recall went to the system prompt: the captured prompt is what the user typed, nothing more
    rows = wait_stored(settings.dsn, 2, settings.data_dir)
    assert [r["payload"]["content"] for r in rows if r["role"] == "user"] == ["Say hello."]


def test_with_the_database_down_qwen_still_answers_and_the_turn_waits_in_the_spool(tmp_path, settings, profile):
    home = make_home("qwen-code", tmp_path / "qwen", tmp_path / "work", settings.dsn, profile)
    down = {**home.env, "MCP_MEMORY_DSN": "postgresql://nobody@127.0.0.1:1/nothing"}
    mcp_memory(down, home.work, "install", "qwen-code")  # the hooks now name a database that is not there
    with ScriptedModel(lambda request: [{"type": "text", "text": "Still here."}]) as model:
        run = headless(replace(home, env=down), model.url, "Are you there?")
    assert "Still here." in run.stdout
    assert stored(settings.dsn) == []
    assert list((settings.data_dir / "spool").iterdir()), "the turn was not spooled"
    mcp_memory(home.env, home.work, "sync", "qwen-code", "--path", str(chat_file(home)))
    texts = [json.dumps(r["payload"]) for r in stored(settings.dsn)]
    assert any("Are you there?" in t for t in texts) and any("Still here." in t for t in texts)
    mcp_memory(home.env, home.work, "sync", "qwen-code", "--path", str(chat_file(home)))
    assert len(stored(settings.dsn)) == len(texts)  # exactly once


def headless_argv(agent: str, printed: str, text: str) -> tuple[Path, list[str]]:
    """The printed resume line `cd DIR && AGENT …`, with the agent's headless flags added."""
    words = shlex.split(printed)
    assert words[0] == "cd" and words[2] == "&&", printed
    cwd, argv = Path(words[1]), words[3:]
    extra = ["-p", text, "--output-format", "json"] + (["--yolo"] if agent == "qwen-code" else [])
    return cwd, argv + extra


def in_order(flat: list[tuple[str, str]], expected: list[tuple[str, str]]) -> bool:
    position = 0
    for kind, fragment in expected:
        while position < len(flat) and not (flat[position][0] == kind and fragment in flat[position][1]):
            position += 1
        if position == len(flat):
            return False
        position += 1
    return True


def foreign(target: str, flat: list[tuple[str, str]]) -> list[tuple[str, str]]:
    markers = [m for agent, listed in FOREIGN.items() if agent != target for m in listed]
    return [(kind, text[:200]) for kind, text in flat if kind in ("user", "assistant") and any(m in text for m in markers)]


def relay_script(notes: Path):
    """Prompt k → answer k; prompt 0 reads `notes` first."""

    def script(request: dict[str, Any]) -> list[dict[str, Any]]:
        flat = transcript(request)
        asked = [i for i, (kind, text) in enumerate(flat) if kind == "user" and "relayprompt" in text]
        if not asked:
            return [{"type": "text", "text": "no prompt"}]
        k = int(re.findall(r"relayprompt(\d+)", flat[asked[-1]][1])[-1])
        if k == 0 and not any(kind == "tool_result" for kind, _ in flat[asked[-1]:]):
            return [{"type": "tool_use", "name": "Read", "input": {"file_path": str(notes)}}]
        return [{"type": "text", "text": f"relayanswer{k}: the code word is quokkaword."}]

    return script


@pytest.mark.skipif(missing("claude-code"), reason="claude is not on PATH")
def test_relay_claude_to_qwen_and_back(tmp_path: Path, settings, profile, service) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text("The code word is quokkaword.\n")
    script = relay_script(work / "notes.md")
    claude = make_home("claude-code", tmp_path / "claude", work, settings.dsn, profile)
    qwen = make_home("qwen-code", tmp_path / "qwen", work, settings.dsn, profile)
    mcp_memory(qwen.env, work, "install", "qwen-code")  # capture of the continued session by its hook
    with ScriptedModel(script) as model:
        headless(claude, model.url, "relayprompt0: read notes.md and tell me the code word.")
    done = mcp_memory(claude.env, work, "import", "claude-code", str(Path(claude.env["HOME"]) / ".claude" / "projects"),
                      "--project", "relay", "--json")
    source = json.loads(done.stdout)["sessions"][0]["session_id"]
    history = [("user", "relayprompt0"), ("tool_call", "notes.md"), ("tool_result", "quokkaword"),
               ("assistant", "relayanswer0")]

    exported = json.loads(mcp_memory(qwen.env, work, "export", source, "--to", "qwen-code", "--install",
                                     "--cwd", str(work), "--json").stdout)
    cwd, argv = headless_argv("qwen-code", exported["resume_command"], "relayprompt1: and the code word again?")
    assert cwd == work and exported["native_id"] in argv
    with ScriptedModel(script) as model:
        run = headless(qwen, model.url, "", argv=argv)
        flat = transcript(model.main_requests()[0])
    assert "relayanswer1" in run.stdout
    assert in_order(flat, [*history, ("user", "relayprompt1")]), flat
    assert not foreign("qwen-code", flat)
    # the continued session was captured by the Stop hook, as a fork holding only its new turns
    rows = wait_stored(settings.dsn, 2, settings.data_dir)
    fork = service.get_session(rows[0]["session_id"])
    assert fork.parent_session_id == source and fork.fork_seq
    own = [m for m in service.read_session(fork.session_id, limit=1000, view="full").messages if not m.inherited_from]
    own_text = json.dumps([m.model_dump(mode="json") for m in own])
    assert "relayprompt1" in own_text and "relayanswer1" in own_text and "relayprompt0" not in own_text

    back = json.loads(mcp_memory(claude.env, work, "export", fork.session_id, "--to", "claude-code", "--install",
                                 "--cwd", str(work), "--json").stdout)
    cwd, argv = headless_argv("claude-code", back["resume_command"], "relayprompt2: once more?")
    with ScriptedModel(script) as model:
        headless(claude, model.url, "", argv=argv)
        flat = transcript(model.main_requests()[0])
    assert in_order(flat, [*history, ("user", "relayprompt1"), ("assistant", "relayanswer1"),
                           ("user", "relayprompt2")]), flat
    assert not foreign("claude-code", flat)
