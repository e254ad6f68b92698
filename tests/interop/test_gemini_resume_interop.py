"""A session relayed into the real Gemini CLI (npm `@google/gemini-cli@0.61.0`) stays listed and
resumable through resumes in different minutes.

The source session (another agent's, started two days ago) is exported with
`mcp-memory export SID --to gemini --install`; its printed resume line runs twice, headless, against
the scripted model on loopback, the second time in a later minute than the first (the test waits for
the minute to turn). A 0.61 resume in a minute other than the chat file's leaves a stub chat file named
after that minute, and the next start of Gemini deletes the stub with every chat file whose name ends
in the same 8 characters (mcp_memory/agents/gemini/README.md): after each resume `gemini
--list-sessions` must still list the session, and the last request to the model must carry the whole
history. Skipped without the binary.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_runs import Home, headless, make_home, mcp_memory, missing
from scripted_model import ScriptedModel, transcript

from mcp_memory.agents import adapter_for

pytestmark = [pytest.mark.interop, pytest.mark.skipif(missing("gemini"), reason="gemini CLI is not on PATH")]

PROMPT, ANSWER = "Which queue does the wombatledger use?", "The wombatledger uses no queue at all."
FOLLOW_UPS = ["resumeprompt1: and its database?", "resumeprompt2: and its backups?"]
REPLIES = ["resumeanswer1: PostgreSQL.", "resumeanswer2: nightly pg_dump."]


def reply(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer to the latest follow-up the request holds."""
    users = [text for kind, text in transcript(request) if kind == "user"]
    for k in (1, 0):
        if users and FOLLOW_UPS[k] in users[-1]:
            return [{"type": "text", "text": REPLIES[k]}]
    return [{"type": "text", "text": "no follow-up"}]


def source_session(service, work: Path) -> str:
    """Another agent's session, started two days ago (so no resume happens in its start minute)."""
    when = datetime.now(UTC) - timedelta(days=2)
    sid = service.create_session("resume", {"title": "wombatledger queue", "agent_source": "claude-code",
                                            "cwd": str(work)}).session_id
    call = {"id": "toolu_1", "type": "function", "function": {"name": "Read", "arguments": '{"file_path": "q.md"}'}}
    service.append_messages(sid, [
        {"role": "user", "content": PROMPT, "append_id": "u1", "created_at": when.isoformat()},
        {"role": "assistant", "content": "Let me read the notes.", "tool_calls": [call], "append_id": "a1",
         "created_at": when.isoformat()},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "wombatnotes: no queue", "append_id": "t1",
         "created_at": when.isoformat()},
        {"role": "assistant", "content": ANSWER, "append_id": "a2", "created_at": when.isoformat()},
    ])
    return sid


def resume_argv(printed: str, text: str) -> tuple[Path, list[str]]:
    """The printed `cd DIR && gemini --resume ID`, with the headless flags added."""
    words = shlex.split(printed)
    assert words[0] == "cd" and words[2] == "&&" and words[3] == "gemini", printed
    return Path(words[1]), [*words[3:], "-p", text, "--yolo", "--output-format", "json"]


def listed(home: Home, url: str) -> list[str]:
    """The `gemini --list-sessions` lines that name a session."""
    done = subprocess.run(["gemini", "--list-sessions"], env=home.with_model(url), cwd=home.work,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if line.strip().endswith("]")]


def minute() -> tuple[int, ...]:
    return tuple(time.gmtime())[:5]


def test_a_relayed_session_stays_listed_and_resumable_across_minutes(tmp_path, settings, profile, service):
    work = tmp_path / "work"
    home = make_home("gemini", tmp_path / "gemini", work, settings.dsn, profile)
    sid = source_session(service, work)
    exported = json.loads(mcp_memory(home.env, work, "export", sid, "--to", "gemini", "--install",
                                     "--json").stdout)
    native_id = exported["native_id"]
    with ScriptedModel(reply) as model:
        assert [native_id in line for line in listed(home, model.url)] == [True]
        started = None
        for k, text in enumerate(FOLLOW_UPS):
            while started is not None and minute() == started:  # the second resume in a later minute
                time.sleep(0.5)
            started = minute()
            cwd, argv = resume_argv(exported["resume_command"], text)
            assert cwd == work
            run = headless(home, model.url, text, argv=argv)
            assert REPLIES[k] in run.stdout, run.stdout[-2000:]
            sessions = listed(home, model.url)
            assert len(sessions) == 1 and native_id in sessions[0], (k, sessions, chats(home))
        history = transcript(model.main_requests()[-1])
    said: list[tuple[str, str]] = []
    for turn in history:  # 0.61 sends the call's result twice after its second rewrite of its own file
        if "<session_context>" not in turn[1] and not (said and said[-1] == turn):
            said.append(turn)
    assert said == [("user", PROMPT), ("assistant", "Let me read the notes."), ("tool_call", said[2][1]),
                    ("tool_result", "wombatnotes: no queue"), ("assistant", ANSWER),
                    ("user", FOLLOW_UPS[0]), ("assistant", REPLIES[0]), ("user", FOLLOW_UPS[1])], history
    # the chat file Gemini kept holds the whole conversation, the second answer included
    (session,) = adapter_for("gemini").read([Path(home.env["HOME"]) / ".gemini" / "tmp" / work.name / "chats"])
    assert session.native_id == native_id
    texts = json.dumps([m.model_dump(mode="json") for m in session.messages])
    assert all(part in texts for part in (PROMPT, ANSWER, *FOLLOW_UPS, *REPLIES))


def chats(home: Home) -> list[str]:
    return sorted(str(p) for p in (Path(home.env["HOME"]) / ".gemini" / "tmp").rglob("chats/*"))
