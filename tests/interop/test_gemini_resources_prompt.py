"""The real Gemini CLI offers mcp-memory's `resume_from_history` prompt as a slash command: run
headless with `/resume_from_history`, the prompt's text (the project's digest and recall, with how
to drill down) is what its model receives. A scripted model server on loopback plays the model.
Needs `gemini` on PATH; skipped otherwise. Nothing leaves the machine."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from agent_runs import RUN_TIMEOUT, install, make_home
from scripted_model import ScriptedModel

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(shutil.which("gemini") is None, reason="gemini is not on PATH"),
]
PROJECT = "prompt-shop"


@pytest.fixture
def history(settings, profile) -> dict[str, str]:
    from mcp_memory.config import load_settings
    from mcp_memory.wiring import build

    svc = build(replace(load_settings(dsn=settings.dsn, environ=profile)))
    try:
        sid = svc.create_session(PROJECT, {"title": "armadillo ledger"}).session_id
        svc.append_messages(sid, [
            {"role": "user", "content": "Where does the armadillo ledger live?", "created_at": "2026-03-01T09:00:00Z"},
            {"role": "assistant", "content": "In PostgreSQL.", "created_at": "2026-03-01T09:01:00Z"},
        ])
        decision = svc.record_decision(sid, "database", "The armadillo ledger stays in PostgreSQL",
                                       message_seq=2).decision_id
    finally:
        svc.db.close()
    return {"session": sid, "decision": decision}


def test_gemini_runs_our_prompt_as_a_slash_command(tmp_path: Path, settings, profile, history) -> None:
    home = make_home("gemini", tmp_path / "gemini", tmp_path / "work", settings.dsn, profile)
    install(home)
    with ScriptedModel(lambda request: [{"type": "text", "text": "Resumed."}]) as model:
        run = subprocess.run(["gemini", "-p", f'/resume_from_history --project_id="{PROJECT}" --task="armadillo ledger"',
                              "--yolo", "--output-format", "json"],
                             env={**home.with_model(model.url), "PWD": str(home.work)}, cwd=home.work,
                             capture_output=True, text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
        requests = model.main_requests()
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    assert json.loads(run.stdout)["response"] == "Resumed."
    # what the model received as the user's turn: the prompt's text, not the slash command
    user = [part.get("text", "") for content in requests[0]["contents"] if content.get("role") == "user"
            for part in content.get("parts") or []]
    said = json.dumps(user[-1], ensure_ascii=False)
    assert "/resume_from_history" not in said and "You are resuming work on project prompt-shop" in said
    assert f"Digest of project {PROJECT}, 2026-03-01" in said and "read_session" in said
    assert history["decision"] in said and f"{history['session']}#2" in said
    assert "Where does the armadillo ledger live?" in said  # the recall block for the task
