"""Fresh homes for the real agent CLIs, pointed at a scripted model on loopback, and their headless runs.

Each agent gets its own HOME (and XDG dirs, CODEX_HOME) under the test's tmp dir, a config that
names the scripted model as its provider, telemetry and updates off, and MCP_MEMORY_DSN selecting the
test database; `install(agent, …)` then runs `mcp-memory install AGENT` as a user would. Every CLI runs
under `subprocess.run(timeout=…)`, which kills it by PID when it overruns.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripted_model import can_call, result_json, tool_results

CLI = {"claude-code": "claude", "opencode": "opencode", "codex": "codex", "gemini": "gemini", "copilot": "copilot",
       "qwen-code": "qwen", "kilo": "kilo", "aider": "aider"}
RUN_TIMEOUT = 180

# OpenCode: a custom openai-compatible provider; "scripted/relay-model" is the user's default model
OPENCODE_PROVIDER = "scripted"
OPENCODE_MODEL = "relay-model"
# Codex: a custom Responses provider; Codex needs a model slug it knows (else it emits an error item)
CODEX_PROVIDER = "scripted-responses"
CODEX_MODEL = "gpt-5.5"
QWEN_MODEL = "scripted-qwen"  # Qwen Code: its OpenAI-compatible provider, model named in settings and env


def missing(agent: str) -> bool:
    return shutil.which(CLI[agent]) is None


def opencode_env(url: str) -> dict[str, str]:
    """OpenCode's switches for an offline run; its npm look-ups go to the scripted server (404)."""
    return {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "npm_config_registry": f"{url}/npm/"}


def kilo_env(url: str) -> dict[str, str]:
    """Kilo Code's switches for an offline run (no daemon, updates, telemetry, sharing, indexing)."""
    return {"KILO_DISABLE_MODELS_FETCH": "1", "KILO_DISABLE_AUTOUPDATE": "1", "KILO_DISABLE_LSP_DOWNLOAD": "1",
            "KILO_DISABLE_SHARE": "1", "KILO_NO_DAEMON": "1", "KILO_DISABLE_SESSION_INGEST": "1",
            "KILO_DISABLE_PRESENCE": "1", "KILO_DISABLE_CODEBASE_INDEXING": "1", "KILO_TELEMETRY_LEVEL": "off",
            "npm_config_registry": f"{url}/npm/"}


@dataclass
class Home:
    """One agent's throwaway home, its env (without the model URL) and the work dir."""

    agent: str
    root: Path
    work: Path
    env: dict[str, str] = field(default_factory=dict)

    def with_model(self, url: str) -> dict[str, str]:
        env = dict(self.env)
        if self.agent == "claude-code":
            env["ANTHROPIC_BASE_URL"] = url
        elif self.agent == "opencode":
            env.update(opencode_env(url))
            _point_at(Path(env["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json", url)
        elif self.agent == "codex":
            _point_at(Path(env["CODEX_HOME"]) / "config.toml", url)
        elif self.agent == "gemini":
            env["GOOGLE_GEMINI_BASE_URL"] = url
        elif self.agent == "copilot":
            env["COPILOT_PROVIDER_BASE_URL"] = f"{url}/v1"
        elif self.agent == "qwen-code":
            env["OPENAI_BASE_URL"] = f"{url}/v1"
        elif self.agent == "kilo":
            env.update(kilo_env(url))
            _point_at(Path(env["XDG_CONFIG_HOME"]) / "kilo" / "kilo.json", url)
        elif self.agent == "aider":
            env["OPENAI_API_BASE"] = f"{url}/v1"
        return env


def _point_at(config: Path, url: str) -> None:
    """The scripted provider's base URL in the agent's config, set to this test's server."""
    config.write_text(re.sub(r"http://127\.0\.0\.1:\d+/v1", f"{url}/v1", config.read_text()))


def make_home(agent: str, root: Path, work: Path, dsn: str, profile: dict[str, str]) -> Home:
    """A fresh home configured for `agent`; the model URL is filled in per run (`with_model`)."""
    home = root / "home"
    for name in ("home", "data", "config", "cache", "state"):
        (root / name).mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in profile.items()
           if not k.startswith(("ANTHROPIC_", "CLAUDE_", "OPENCODE", "XDG_", "CODEX_", "GEMINI_", "GOOGLE_",
                                "OPENAI_", "QWEN_", "KILO_", "npm_", "COPILOT_"))}
    env.update(HOME=str(home), XDG_DATA_HOME=str(root / "data"), XDG_CONFIG_HOME=str(root / "config"),
               XDG_CACHE_HOME=str(root / "cache"), XDG_STATE_HOME=str(root / "state"), MCP_MEMORY_DSN=dsn,
               TERM="dumb", LANG="C.UTF-8", NO_COLOR="1")
    if agent == "claude-code":
        (home / ".claude.json").write_text(json.dumps({
            "hasCompletedOnboarding": True, "numStartups": 1,
            "customApiKeyResponses": {"approved": ["sk-ant-dummy"], "rejected": []},
            "projects": {str(work): {"hasTrustDialogAccepted": True}}}))
        env.update(ANTHROPIC_API_KEY="sk-ant-dummy", DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", ENABLE_TOOL_SEARCH="false")
    elif agent == "opencode":
        folder = root / "config" / "opencode"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "opencode.json").write_text(json.dumps({
            "$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
            "model": f"{OPENCODE_PROVIDER}/{OPENCODE_MODEL}", "small_model": f"{OPENCODE_PROVIDER}/{OPENCODE_MODEL}",
            "permission": {"*": "allow"},
            "provider": {OPENCODE_PROVIDER: {
                "npm": "@ai-sdk/openai-compatible", "name": "Scripted model",
                "options": {"baseURL": "http://127.0.0.1:1/v1", "apiKey": "dummy"},
                "models": {OPENCODE_MODEL: {"name": "Relay model", "tool_call": True,
                                            "limit": {"context": 128000, "output": 8192}}}}}}, indent=2))
    elif agent == "codex":
        codex_home = root / "codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            f'model = "{CODEX_MODEL}"\nmodel_provider = "{CODEX_PROVIDER}"\napproval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\ncheck_for_update_on_startup = false\n\n'
            f'[model_providers.{CODEX_PROVIDER}]\nname = "Scripted model"\nbase_url = "http://127.0.0.1:1/v1"\n'
            'env_key = "SCRIPTED_API_KEY"\nwire_api = "responses"\n\n[analytics]\nenabled = false\n\n'
            '[features]\ntool_search = false\nplugins = false\nremote_plugin = false\napps = false\nin_app_updates = false\n')
        env.update(CODEX_HOME=str(codex_home), SCRIPTED_API_KEY="dummy", RUST_LOG="error")
    elif agent == "gemini":
        (home / ".gemini").mkdir()
        (home / ".gemini" / "settings.json").write_text(json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
            "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "model": {"name": "gemini-2.5-pro"}}))
        env.update(GEMINI_API_KEY="dummy", GEMINI_CLI_NO_RELAUNCH="true")
    elif agent == "copilot":  # BYOK: a custom provider and offline mode need no GitHub login
        env.update(COPILOT_OFFLINE="true", COPILOT_AUTO_UPDATE="false", COPILOT_ALLOW_ALL="true",
                   COPILOT_PROVIDER_TYPE="openai", COPILOT_PROVIDER_API_KEY="sk-dummy", COPILOT_MODEL="fake-model")
    elif agent == "kilo":  # OpenCode's provider config, in Kilo's config folder
        folder = root / "config" / "kilo"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kilo.json").write_text(json.dumps({
            "$schema": "https://app.kilo.ai/config.json", "autoupdate": False, "share": "disabled",
            "model": f"{OPENCODE_PROVIDER}/{OPENCODE_MODEL}", "small_model": f"{OPENCODE_PROVIDER}/{OPENCODE_MODEL}",
            "permission": {"*": "allow"},
            "provider": {OPENCODE_PROVIDER: {
                "npm": "@ai-sdk/openai-compatible", "name": "Scripted model",
                "options": {"baseURL": "http://127.0.0.1:1/v1", "apiKey": "dummy"},
                "models": {OPENCODE_MODEL: {"name": "Relay model", "tool_call": True,
                                            "limit": {"context": 128000, "output": 8192}}}}}}, indent=2))
    elif agent == "qwen-code":
        (home / ".qwen").mkdir()
        (home / ".qwen" / "settings.json").write_text(json.dumps({
            "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
            "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "disableAutoUpdate": True, "disableUpdateNag": True},
            "model": {"name": QWEN_MODEL}}))
        env.update(OPENAI_API_KEY="sk-dummy", OPENAI_MODEL=QWEN_MODEL, QWEN_CODE_NO_RELAUNCH="true",
                   QWEN_CODE_SUPPRESS_YOLO_WARNING="1")
    elif agent == "aider":
        aider_home(home)
        env.update(OPENAI_API_KEY="sk-dummy", LITELLM_LOCAL_MODEL_COST_MAP="True")
    return Home(agent, root, work, env)


# Aider: its switches for an offline headless run, in ~/.aider.conf.yml so that a printed resume line
# runs as printed (plus --message)
AIDER_CONFIG = """model: openai/fake-model
git: false
yes-always: true
check-update: false
show-release-notes: false
analytics-disable: true
show-model-warnings: false
pretty: false
stream: false
"""


def aider_home(home: Path) -> None:
    """The switches above, and litellm's bundled price map as Aider's model-info cache (without it
    Aider fetches the map from GitHub at every start)."""
    (home / ".aider.conf.yml").write_text(AIDER_CONFIG)
    caches = home / ".aider" / "caches"
    caches.mkdir(parents=True)
    binary = Path(os.path.realpath(shutil.which("aider") or "aider"))
    for found in binary.parent.parent.glob("lib/python*/site-packages/litellm/model_prices_and_context_window_backup.json"):
        shutil.copy(found, caches / "model_prices_and_context_window.json")


def mcp_memory(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "mcp_memory", *args], env={**env, "PWD": str(cwd)}, cwd=cwd,
                          capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"mcp-memory {' '.join(args)}: {done.stderr[-3000:]}"
    return done


def install(home: Home) -> None:
    mcp_memory(home.env, home.work, "install", home.agent)


def headless(home: Home, url: str, prompt: str, resume: str | None = None,
             argv: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """One headless run of the agent with `prompt` (continuing native session `resume` when given),
    or `argv` as given (a printed resume command with the headless flags added)."""
    env = {**home.with_model(url), "PWD": str(home.work)}  # OpenCode (and Kilo) open their instance at $PWD
    argv = argv or run_argv(home.agent, prompt, resume)
    if home.agent == "aider" and "--message" not in argv:
        argv = [*argv, "--message", prompt]
    # OpenCode takes the prompt on stdin (as an argument, spaces break it); the others get /dev/null
    # (`codex exec` waits for more input otherwise)
    done = subprocess.run(argv, env=env, cwd=home.work, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          input=prompt if home.agent in ("opencode", "kilo") else "")
    assert done.returncode == 0, f"{argv}: {done.stderr[-3000:]}\n{done.stdout[-3000:]}"
    return done


def run_argv(agent: str, prompt: str, resume: str | None) -> list[str]:
    if agent == "claude-code":
        return ["claude", "-p", prompt, *(["--resume", resume] if resume else []),
                "--allowedTools", "mcp__mcp-memory", "Read", "Bash", "--output-format", "json"]
    if agent == "opencode":
        return ["opencode", "run", "--format", "json", *(["--session", resume] if resume else [])]
    if agent == "codex":
        return ["codex", "exec", "--json", "--skip-git-repo-check", *(["resume", resume] if resume else []), prompt]
    if agent == "copilot":
        return ["copilot", "-p", prompt, "--allow-all-tools", *([f"--resume={resume}"] if resume else [])]
    if agent == "kilo":
        return ["kilo", "run", "--format", "json", *(["--session", resume] if resume else [])]
    if agent == "qwen-code":
        return ["qwen", "-p", prompt, "--yolo", "--output-format", "json", *(["--resume", resume] if resume else [])]
    if agent == "aider":  # `resume`: a history file of the work dir (Aider has no session ids)
        return ["aider", *(["--chat-history-file", resume, "--restore-chat-history"] if resume else []),
                "--message", prompt]
    return ["gemini", "-p", prompt, "--yolo", "--output-format", "json", *(["--resume", resume] if resume else [])]


# ---------------------------------------------------------------- the memory-tools script

PROMPT = "Remember our ledger choice, please."
FINAL = "Noted: the ledger stays in PostgreSQL."


def memory_tools_script(request: dict[str, Any]) -> list[dict[str, Any]]:
    """One mcp-memory tool per turn; each call is built from what the earlier tool results said."""
    if not can_call(request, "create_session"):
        return [{"type": "text", "text": "The mcp-memory tools are not available."}]
    results = tool_results(request)
    step = len(results)
    if step == 0:
        return [{"type": "tool_use", "name": "create_session",
                 "input": {"project_id": "interop", "meta": {"title": "ledger talk"}}}]
    try:
        session_id = result_json(results[0]["text"])["session_id"]
    except (ValueError, KeyError, TypeError):
        return [{"type": "text", "text": "create_session said: " + results[0]["text"][:500]}]
    calls = [
        ("append_message", {"session_id": session_id, "message": {
            "role": "user", "content": "We keep the zebraledger in PostgreSQL.", "append_id": "interop-1"}}),
        ("search_messages", {"query": "zebraledger", "project_id": "interop"}),
        ("record_decision", {"session_id": session_id, "decision_type": "database",
                             "summary": "zebraledger lives in PostgreSQL", "rationale": "one database to run"}),
        ("recall", {"query": "zebraledger", "project_id": "interop"}),
    ]
    if step <= len(calls):
        name, arguments = calls[step - 1]
        return [{"type": "tool_use", "name": name, "input": arguments}]
    return [{"type": "text", "text": FINAL}]

