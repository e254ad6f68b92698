"""A relay through the real CLIs: Claude Code → Aider → Claude Code (tests/interop/test_relay_hops.py's
scenario). Claude Code reads notes.md with its Read tool and answers; `export --to aider --install`
writes a history that `aider --restore-chat-history` (the printed line) sends to its model in full,
the tool call and its result as reply text; the continued file is captured as a fork holding only
the new turn, and exported back into Claude Code, whose model gets every turn and none of Aider's
own output lines. Skipped unless both `claude` and `aider` are on PATH."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from agent_runs import headless, make_home, mcp_memory, missing
from scripted_model import ScriptedModel, tool_results, transcript
from test_relay_hops import answer, foreign_scaffolding, headless_argv, import_native, in_order, prompt, relay_script

pytestmark = [pytest.mark.interop,
              pytest.mark.skipif(missing("claude-code") or missing("aider"), reason="needs claude and aider on PATH")]

AIDER_OWN = ["aider chat started at", "Tokens:", "Detected dumb terminal", "Restored previous conversation"]


def test_relay_claude_code_aider_claude_code(tmp_path: Path, settings, profile, service) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text("The code word is quokkaword.\n")
    script = relay_script(work / "notes.md")
    start = make_home("claude-code", tmp_path / "claude-start", work, settings.dsn, profile)
    with ScriptedModel(script) as model:
        headless(start, model.url, prompt(0))
        assert "quokkaword" in tool_results(model.main_requests()[-1])[0]["text"]
    (imported,) = import_native(start)

    aider = make_home("aider", tmp_path / "aider", work, settings.dsn, profile)
    exported = json.loads(mcp_memory(aider.env, work, "export", imported["session_id"], "--to", "aider",
                                     "--install", "--cwd", str(work), "--json").stdout)
    assert exported["relay"], exported
    words = shlex.split(exported["resume_command"])
    assert words[:3] == ["cd", str(work), "&&"] and words[3:] == ["aider", "--restore-chat-history"], words
    with ScriptedModel(script, toolless=True) as model:
        headless(aider, model.url, prompt(1), argv=words[3:])
        flat = [(kind, text.strip()) for kind, text in transcript(model.requests[0])]
    said = " ".join(text for _, text in flat)
    assert in_order(flat, [("user", "relayprompt0"), ("assistant", answer(0)), ("user", "relayprompt1")]), flat
    assert "Called Read" in said and "Result of Read: 1\tThe code word is quokkaword." in said and not foreign_scaffolding("aider", flat), flat

    synced = json.loads(mcp_memory(aider.env, work, "sync", "aider", "--path", str(work / ".aider.chat.history.md"),
                                   "--json").stdout)["sessions"]
    (fork,) = [s for s in synced if s["native_id"] == exported["native_id"]]
    session = service.get_session(fork["session_id"])
    assert session.parent_session_id == imported["session_id"] and session.fork_seq
    own = [m for m in service.read_session(session.session_id, limit=1000, view="full").messages if not m.inherited_from]
    own_text = json.dumps([m.model_dump(mode="json") for m in own])
    assert "relayprompt1" in own_text and "relayprompt0" not in own_text, own_text[:2000]

    back = make_home("claude-code", tmp_path / "claude-back", work, settings.dsn, profile)
    exported = json.loads(mcp_memory(back.env, work, "export", session.session_id, "--to", "claude-code",
                                     "--install", "--cwd", str(work), "--json").stdout)
    cwd, argv = headless_argv("claude-code", exported["resume_command"], prompt(2))
    with ScriptedModel(script) as model:
        back.work = cwd
        headless(back, model.url, prompt(2), argv=argv)
        flat = transcript(model.main_requests()[0])
    assert in_order(flat, [("user", "relayprompt0"), ("tool_result", "quokkaword"), ("assistant", answer(0)),
                           ("user", "relayprompt1"), ("user", "relayprompt2")]), flat
    assert not [t for _, t in flat if any(marker in t for marker in AIDER_OWN)], flat
