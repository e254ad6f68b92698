"""`export --install` resumes with the target agent's own configured provider and model
(README, Command line): OpenCode's `model` from opencode.json, Codex's `model_provider`/`model` from
config.toml; an explicit --option still wins. Drives the real CLI against a real database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mcp_memory.core.service import Service


def run(env: dict[str, str], *args: str, dsn: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", "--dsn", dsn, *args], env=env,
                          capture_output=True, text=True, timeout=120)


def session(service: Service) -> str:
    created = service.create_session("p", {"title": "t", "agent_source": "claude-code", "model": "claude-opus-4"})
    service.append_messages(created.session_id, [
        {"role": "user", "content": "hello", "append_id": "u1"},
        {"role": "assistant", "content": "hi", "append_id": "a1", "metadata": {"model": "claude-opus-4"}}])
    return created.session_id


def env_for(profile: dict[str, str], home: Path) -> dict[str, str]:
    env = {**profile, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local" / "share"), "CODEX_HOME": str(home / ".codex"),
           "PATH": "/usr/bin:/bin"}  # no opencode binary: the import file is left for the printed line
    env.pop("CLAUDE_CONFIG_DIR", None)
    return env


def test_opencode_install_uses_the_configured_model(service, settings, profile, tmp_path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(
        '{\n  // mine\n  "model": "localai/qwen3-coder",\n  "provider": {"localai": {}}\n}\n')
    work.mkdir()
    sid = session(service)
    result = run(env_for(profile, home), "export", sid, "--to", "opencode", "--install", "--cwd", str(work),
                 "--json", dsn=settings.dsn)
    assert result.returncode == 0, result.stderr
    document = json.loads(Path(json.loads(result.stdout)["files"][0]).read_text())
    assistants = [m["info"] for m in document["messages"] if m["info"]["role"] == "assistant"]
    assert [(a["providerID"], a["modelID"]) for a in assistants] == [("localai", "qwen3-coder")]
    users = [m["info"] for m in document["messages"] if m["info"]["role"] == "user"]
    assert all(u["model"] == {"providerID": "localai", "modelID": "qwen3-coder"} for u in users)
    # a project's own config wins over the user's, and --option over both
    (work / "opencode.json").write_text('{"model": "projectai/small"}')
    chosen = run(env_for(profile, home), "export", sid, "--to", "opencode", "--install", "--cwd", str(work),
                 "--option", "opencode_model=explicit/one", "--json", dsn=settings.dsn)
    document = json.loads(Path(json.loads(chosen.stdout)["files"][0]).read_text())
    assert {m["info"].get("providerID") for m in document["messages"]} >= {"explicit"}


def test_codex_install_uses_the_configured_provider(service, settings, profile, tmp_path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text('model_provider = "localai"\nmodel = "qwen3-coder"\n'
                                                 '[model_providers.localai]\nbase_url = "http://127.0.0.1:1/v1"\n')
    work.mkdir()
    sid = session(service)
    result = run(env_for(profile, home), "export", sid, "--to", "codex", "--install", "--cwd", str(work), "--json",
                 dsn=settings.dsn)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in Path(json.loads(result.stdout)["files"][0]).read_text().splitlines()]
    meta = next(line["payload"] for line in lines if line["type"] == "session_meta")
    context = next(line["payload"] for line in lines if line["type"] == "turn_context")
    assert meta["model_provider"] == "localai" and context["model"] == "qwen3-coder"
    os.remove(home / ".codex" / "config.toml")  # no config: Codex's own default provider
    plain = run(env_for(profile, home), "export", sid, "--to", "codex", "--install", "--cwd", str(work), "--json",
                dsn=settings.dsn)
    lines = [json.loads(line) for line in Path(json.loads(plain.stdout)["files"][0]).read_text().splitlines()]
    assert next(line["payload"] for line in lines if line["type"] == "session_meta")["model_provider"] == "openai"
