"""Relay hops through the real CLIs: Claude Code → OpenCode → Codex → Gemini CLI → Claude Code.

A real Claude Code run (scripted model) reads a file in the work dir and answers; it is imported.
Each hop then runs `mcp-memory export SID --to TARGET --install --cwd WORK`, runs the printed resume
line (with the agent's headless flag added) with a new prompt, and asserts from the request the
target sent its model that every earlier prompt, answer, tool call and result arrived, in order.
The continued native session is imported back, and the database must hold one lineage without
copies: each hop a fork of the previous one (parent_session_id, fork_seq) storing only its new
turns, and search finding each turn once. OpenCode and Codex run a non-default provider/model of
their own config (tests/interop/agent_runs.py), which the export must pick up: the continued
session reaches the scripted model only through that provider.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_runs import OPENCODE_MODEL, Home, headless, make_home, mcp_memory, missing
from scripted_model import ScriptedModel, tool_results, transcript

pytestmark = [pytest.mark.interop,
              pytest.mark.skipif(any(missing(a) for a in ("claude-code", "opencode", "codex", "gemini")),
                                 reason="needs claude, opencode, codex and gemini on PATH")]

HOPS = ["opencode", "codex", "gemini", "claude-code"]
# What each agent injects into its own sessions as turns (its scaffolding, mcp_memory/scaffolding.py):
# none of it may reach another agent's model after a relay.
SCAFFOLD_MARKERS = {
    "claude-code": ["<system-reminder>", "Caveat: The messages below", "<command-name>", "<local-command-stdout>"],
    "opencode": ["<system-reminder>", "Called the Read tool with the following input"],
    "codex": ["<environment_context>", "<permissions instructions>", "<user_instructions>", "<skills_instructions>"],
    "gemini": ["<session_context>", "This is the Gemini CLI", "<hook_context>"],
    "aider": ["aider chat started at", "Detected dumb terminal", "Restored previous conversation history"],
}
NOTES = "The code word is quokkaword.\n"


def prompt(k: int) -> str:
    return f"relayprompt{k}: read notes.md and tell me the code word." if k == 0 else \
        f"relayprompt{k}: what was the code word again?"


def answer(k: int) -> str:
    return f"relayanswer{k}: the code word is quokkaword."


def relay_script(notes: Path) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    """Prompt k → answer k; the first prompt reads `notes` with Claude Code's Read tool first."""

    def script(request: dict[str, Any]) -> list[dict[str, Any]]:
        flat = transcript(request)
        asked = [i for i, (kind, text) in enumerate(flat) if kind == "user" and "relayprompt" in text]
        if not asked:
            return [{"type": "text", "text": "no prompt"}]
        k = int(re.search(r"relayprompt(\d+)", flat[asked[-1]][1]).group(1))
        answered = any(kind == "tool_result" for kind, _ in flat[asked[-1]:])
        if k == 0 and not answered:
            return [{"type": "tool_use", "name": "Read", "input": {"file_path": str(notes)}}]
        return [{"type": "text", "text": answer(k)}]

    return script


def native_files(home: Home) -> Path:
    """Where the agent keeps its sessions, as `mcp-memory import AGENT` takes them."""
    root = Path(home.env["HOME"])
    return {"claude-code": root / ".claude" / "projects",
            "opencode": Path(home.env["XDG_DATA_HOME"]) / "opencode" / "opencode.db",
            "codex": Path(home.env.get("CODEX_HOME", root)) / "sessions",
            "gemini": root / ".gemini" / "tmp"}[home.agent]


def import_native(home: Home, holding: str | None = None) -> list[dict[str, Any]]:
    """Import the agent's sessions; for Gemini CLI only the chat files holding `holding` (a resumed
    Gemini run also leaves a stub file of the same session and an older copy beside it)."""
    paths = [native_files(home)]
    if home.agent == "gemini" and holding:
        paths = [p for p in native_files(home).rglob("*.json*") if holding in p.read_text()]
    done = mcp_memory(home.env, home.work, "import", home.agent, *map(str, paths), "--project", "relay",
                      "--json")
    return json.loads(done.stdout)["sessions"]


def headless_argv(agent: str, printed: str, text: str) -> tuple[Path, list[str]]:
    """The printed resume line `cd DIR && AGENT …`, with the agent's headless flags added."""
    words = shlex.split(printed)
    assert words[0] == "cd" and words[2] == "&&", printed
    cwd, argv = Path(words[1]), words[3:]
    if agent == "claude-code":
        argv += ["-p", text, "--output-format", "json"]
    elif agent == "opencode":  # `opencode --session ID` → `opencode run --session ID` (prompt on stdin)
        argv = [argv[0], "run", *argv[1:], "--format", "json"]
    elif agent == "codex":  # `codex resume ID` → `codex exec resume ID PROMPT`
        assert argv[1] == "resume", printed
        argv = [argv[0], "exec", "--json", "--skip-git-repo-check", *argv[1:], text]
    else:
        argv += ["-p", text, "--yolo", "--output-format", "json"]
    return cwd, argv


def in_order(flat: list[tuple[str, str]], expected: list[tuple[str, str]]) -> bool:
    """Each expected (kind, fragment) found after the previous one."""
    position = 0
    for kind, fragment in expected:
        while position < len(flat) and not (flat[position][0] == kind and fragment in flat[position][1]):
            position += 1
        if position == len(flat):
            return False
        position += 1
    return True


def test_relay_claude_opencode_codex_gemini_claude(tmp_path: Path, settings, profile, service) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text(NOTES)
    script = relay_script(work / "notes.md")
    start = make_home("claude-code", tmp_path / "claude-start", work, settings.dsn, profile)
    with ScriptedModel(script) as model:
        headless(start, model.url, prompt(0))
        first = model.main_requests()[-1]
    assert "quokkaword" in tool_results(first)[0]["text"]
    (imported,) = import_native(start)
    chain = [imported["session_id"]]

    expected = [("user", "relayprompt0"), ("tool_call", "notes.md"), ("tool_result", "quokkaword"),
                ("assistant", answer(0))]
    for k, agent in enumerate(HOPS, start=1):
        home = make_home(agent, tmp_path / f"hop{k}-{agent}", work, settings.dsn, profile)
        exported = json.loads(mcp_memory(home.env, work, "export", chain[-1], "--to", agent, "--install",
                                         "--cwd", str(work), "--json").stdout)
        assert exported["relay"], exported
        cwd, argv = headless_argv(agent, exported["resume_command"], prompt(k))
        assert cwd == work and exported["native_id"] in argv
        with ScriptedModel(script) as model:
            home.work = cwd
            run = headless(home, model.url, prompt(k), argv=argv)
            requests = model.main_requests()
        assert requests, run.stdout[-2000:]
        flat = transcript(requests[0])
        carried = foreign_scaffolding(agent, flat)
        assert not carried, (agent, carried)
        expected.append(("user", f"relayprompt{k}"))
        assert in_order(flat, expected), (agent, flat)
        if agent == "opencode":  # the user's own provider/model, taken from the config by export
            assert requests[0]["model"] == OPENCODE_MODEL, requests[0]["model"]
        expected.append(("assistant", answer(k)))

        results = import_native(home, holding=answer(k))
        stored = [s for s in results if s["native_id"] == exported["native_id"]]
        assert len(stored) == 1, stored
        session = service.get_session(stored[0]["session_id"])
        assert session.parent_session_id == chain[-1] and session.fork_seq, (
            agent, session, results, sorted(str(p) for p in native_files(home).rglob("*")))
        page = service.read_session(session.session_id, limit=1000, view="full")
        own = [m for m in page.messages if not m.inherited_from]
        own_text = json.dumps([m.model_dump(mode="json") for m in own])
        assert f"relayprompt{k}" in own_text and answer(k) in own_text
        assert "relayprompt0" not in own_text, (agent, own_text[:2000])
        chain.append(session.session_id)

    for k in range(len(HOPS) + 1):
        for word in (f"relayprompt{k}", f"relayanswer{k}"):
            matches = service.search_messages(word, project_id="relay", limit=50).matches
            holding = [(m.session_id, m.seq) for m in matches if word in m.snippet.replace("**", "")]
            assert len(holding) == 1, (word, holding, chain)  # each turn is stored once in the chain
    listed = {s.session_id: s for s in service.list_sessions(project_id="relay").sessions}
    assert set(chain) <= set(listed)
    words = scaffolding_only_words(service, chain)
    assert words  # Claude Code's, Codex's and Gemini CLI's own material is in the chain
    found = {w: [(m.session_id, m.seq) for m in service.search_messages(w, project_id="relay").matches]
             for w in words}
    assert not any(found.values()), {w: hits for w, hits in found.items() if hits}


def foreign_scaffolding(target: str, flat: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Turns of the request that hold another agent's scaffolding (the target's own may be there)."""
    own = set(SCAFFOLD_MARKERS[target])
    markers = [m for agent, listed in SCAFFOLD_MARKERS.items() if agent != target for m in listed if m not in own]
    return [(kind, text[:200]) for kind, text in flat
            if kind in ("user", "assistant") and any(m in text for m in markers)]


def scaffolding_only_words(service, chain: list[str]) -> list[str]:
    """Words of the chain's scaffolding that nothing else in it says (not even their first five
    letters, so that no stemming can make them match a turn that was said)."""
    scaffold, said = [], []
    for session_id in chain:
        for m in service.read_session(session_id, limit=1000, view="full").messages:
            parts = m.content if isinstance(m.content, list) else [m.content]
            for part in parts:
                text = part if isinstance(part, str) else getattr(part, "text", None)
                if not text:
                    continue
                hidden = m.metadata.get("scaffold") or (not isinstance(part, str) and getattr(part, "scaffold", None))
                (scaffold if hidden else said).append(text.lower())
            said.extend(json.dumps([c.model_dump() for c in m.tool_calls or []]).lower() for _ in [0])
            if m.thinking and m.thinking.content:
                said.append(m.thinking.content.lower())
    spoken = "\n".join(said)
    prefixes = {w[:5] for w in re.findall(r"[a-z]{5,}", spoken)}
    return sorted({w for w in re.findall(r"[a-z]{7,}", "\n".join(scaffold)) if w[:5] not in prefixes})[:40]
