"""What a host writes and prints for hostile session meta, and what `install` writes (README, Command line):
ids and names from meta never become paths outside the output or agent folders, printed resume
lines are inert, and no secret lands in an agent's or a project's config.

Session meta is written by any project writer (MCP, REST, an imported file), so every test here
crafts it as an attacker would and drives the real CLI against a real database."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_memory.agents import names
from mcp_memory.core.service import Service

INJECTED = "x; touch PWNED #"
HOSTILE_META = [
    {"native_id": "../../../../escaped", "imported_from": "{agent}"},
    {"native_id": "/tmp/../{victim}", "imported_from": "{agent}"},
    {"native_id": "..", "imported_from": "{agent}", "native": {"id": "../../escaped", "agent_id": "../../escaped"}},
    {"native_id": INJECTED, "imported_from": "{agent}", "cwd": "/tmp/$(touch PWNED)'\"; touch PWNED"},
    {"native_id": ["not", "a", "string"], "imported_from": {"x": 1}, "cwd": 7},
]


def run(env: dict[str, str], *args: str, dsn: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", "--dsn", dsn, *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def hostile_session(service: Service, agent: str, meta: dict, victim: Path) -> str:
    text = json.dumps(meta).replace("{agent}", agent).replace("{victim}", str(victim).lstrip("/"))
    session = service.create_session("p", json.loads(text))
    service.append_messages(session.session_id, [
        {"role": "user", "content": "hello", "append_id": "u1"},
        {"role": "assistant", "content": "hi", "append_id": "a1"}])
    return session.session_id


def agent_env(profile: dict[str, str], home: Path) -> dict[str, str]:
    env = {**profile, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local" / "share"), "CODEX_HOME": str(home / ".codex"),
           "HERMES_HOME": str(home / ".hermes"), "DSH_HOME": str(home / ".dsh"),
           "PATH": os.environ.get("PATH", "")}
    env.pop("CLAUDE_CONFIG_DIR", None)
    return env


@pytest.mark.parametrize("agent", names())
def test_hostile_meta_never_writes_outside_the_output_folder(agent, service, settings, profile, tmp_path) -> None:
    victim = tmp_path / "victim.json"
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = agent_env(profile, tmp_path / "home")
    before = files_under(tmp_path)
    for meta in HOSTILE_META:
        sid = hostile_session(service, agent, meta, victim)
        result = run(env, "export", sid, "--to", agent, "--out", str(out), "--json", dsn=settings.dsn, cwd=elsewhere)
        assert result.returncode in (0, 1), result.stderr
        assert "Traceback" not in result.stderr
        if result.returncode == 1:
            assert "[invalid]" in result.stderr, result.stderr
            continue
        written = [Path(f) for f in json.loads(result.stdout)["files"]]
        assert written and all(Path(os.path.realpath(f)).is_relative_to(out.resolve()) for f in written)
    new = files_under(tmp_path) - before
    outside = {p for p in new if not p.is_relative_to(out) and not p.is_relative_to(tmp_path / "home")}
    assert not outside, outside
    assert not victim.exists() and not list(tmp_path.rglob("PWNED")) and not (tmp_path / "escaped").exists()


INSTALLABLE = ["claude-code", "codex", "gemini", "hermes", "deepseek-harness"]  # OpenCode imports via its CLI


@pytest.mark.parametrize("agent", INSTALLABLE)
def test_hostile_meta_installs_only_into_the_agents_folder(agent, service, settings, profile, tmp_path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = agent_env(profile, home)
    before = files_under(tmp_path)
    for meta in HOSTILE_META:
        sid = hostile_session(service, agent, meta, tmp_path / "victim.json")
        result = run(env, "export", sid, "--to", agent, "--install", "--cwd", str(work), "--json",
                     dsn=settings.dsn, cwd=work)
        assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
        if result.returncode == 0:
            command = json.loads(result.stdout)["resume_command"]
            if command:  # inert: every id stays one argument, no second command appears
                words = shlex.split(command)
                assert words.count("&&") <= 1 and ";" not in words and "touch" not in words, words
    new = files_under(tmp_path) - before
    assert all(p.is_relative_to(home) for p in new), sorted(map(str, new))
    assert not list(tmp_path.rglob("PWNED"))


def test_an_injected_native_id_stays_one_argument_of_the_resume_line(service, settings, profile, tmp_path) -> None:
    """The printed line, run by a shell, runs nothing but the agent (here a stub that records argv)."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work's dir"
    bin_dir.mkdir()
    work.mkdir()
    for tool in ("claude", "codex", "gemini", "dsh"):
        stub = bin_dir / tool
        stub.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGV_FILE"\n')
        stub.chmod(0o755)
    env = {**agent_env(profile, tmp_path / "home"), "PATH": f"{bin_dir}:/usr/bin:/bin",
           "ARGV_FILE": str(tmp_path / "argv")}
    for agent in ("claude-code", "codex", "gemini", "deepseek-harness"):
        sid = hostile_session(service, agent, {"native_id": INJECTED, "imported_from": agent,
                                                "cwd": str(work)}, tmp_path / "victim")
        result = run(env, "export", sid, "--to", agent, "--install", "--cwd", str(work), "--json", dsn=settings.dsn)
        assert result.returncode == 0, result.stderr
        line = json.loads(result.stdout)["resume_command"]
        subprocess.run(["sh", "-c", line], env=env, check=True, timeout=30, cwd=tmp_path)
        assert not list(tmp_path.rglob("PWNED")), line
        assert (tmp_path / "argv").read_text().splitlines()[-1] == shlex.split(line)[-1]


def test_export_out_names_a_folder_and_missing_or_bad_folders_are_clear(service, settings, profile, tmp_path) -> None:
    sid = hostile_session(service, "openai", {"title": "t"}, tmp_path / "v")
    env = agent_env(profile, tmp_path / "home")
    nested = tmp_path / "new" / "nested"
    ok = run(env, "export", sid, "--to", "openai", "--out", str(nested), dsn=settings.dsn)
    assert ok.returncode == 0 and len(list(nested.iterdir())) == 1, ok.stderr
    assert "resume with" not in ok.stdout and "--install" in ok.stdout  # nothing was installed yet
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    bad = run(env, "export", sid, "--to", "openai", "--out", str(blocker), dsn=settings.dsn)
    assert bad.returncode == 1 and "[invalid]" in bad.stderr and "Traceback" not in bad.stderr
    unknown = run(env, "export", sid, "--to", "openai", "--option", "nope=1", dsn=settings.dsn)
    assert unknown.returncode == 1 and "reasoning" in unknown.stderr
    helptext = run(env, "export", "--help", dsn=settings.dsn).stdout
    for agent, option in (("opencode", "opencode_model="), ("codex", "model_provider="), ("openai", "reasoning=")):
        assert any(agent in line and option in line for line in helptext.splitlines()), helptext


def test_a_symlink_in_the_output_folder_is_not_followed_out(service, settings, profile, tmp_path) -> None:
    out, target = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    target.mkdir()
    sid = hostile_session(service, "openai", {"title": "t", "native_id": "linked", "imported_from": "openai"},
                          tmp_path / "v")
    (out / "linked.json").symlink_to(target / "stolen.json")
    result = run(agent_env(profile, tmp_path / "home"), "export", sid, "--to", "openai", "--out", str(out),
                 dsn=settings.dsn)
    assert result.returncode == 1 and "not inside" in result.stderr
    assert not (target / "stolen.json").exists()


# --- install: the profile, never a secret -------------------------------------------------------------

SECRET = "tok_supersecret_0123456789"


def install_env(profile: dict[str, str], home: Path) -> dict[str, str]:
    env = agent_env(profile, home)
    env["MCP_MEMORY_DSN"] = f"postgresql://host_a:{SECRET}@db.invalid:5432/memory"
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"  # no keyring: the 0600 file
    return env


@pytest.mark.parametrize("agent", ["claude-code", "opencode", "codex", "gemini", "hermes"])
def test_install_writes_no_secret_and_keeps_files_private(agent, profile, tmp_path) -> None:
    home = tmp_path / "home"
    env = install_env(profile, home)
    result = subprocess.run([sys.executable, "-m", "mcp_memory", "install", agent], env=env, capture_output=True,
                            text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr
    written = [p for p in files_under(home) if p.is_file()]
    configs = [p for p in written if "mcp-memory" not in p.parts]
    assert configs, written
    for path in configs:
        text = path.read_text(encoding="utf-8")
        assert SECRET not in text, path
        assert "host_a@db.invalid" in text or path.suffix == ".js" or "settings" in path.name, path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    credentials = [p for p in written if "mcp-memory" in p.parts and SECRET in p.read_text(encoding="utf-8")]
    assert credentials and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in credentials)


def test_project_scope_install_leaves_no_secret_in_the_repository(profile, tmp_path) -> None:
    home, repo = tmp_path / "home", tmp_path / "repo"
    repo.mkdir()
    env = install_env(profile, home)
    result = subprocess.run([sys.executable, "-m", "mcp_memory", "install", "claude-code", "--scope", "project",
                             "--cwd", str(repo)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    entry = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["mcp-memory"]
    assert entry["env"] == {"MCP_MEMORY_DSN": "postgresql://host_a@db.invalid:5432/memory",
                            "MCP_MEMORY_HOME": profile["MCP_MEMORY_HOME"]}
    assert all(SECRET not in p.read_text() for p in files_under(repo))


def test_a_symlinked_config_is_edited_through_the_link(profile, tmp_path) -> None:
    home, dotfiles = tmp_path / "home", tmp_path / "dotfiles"
    home.mkdir()
    dotfiles.mkdir()
    (dotfiles / "claude.json").write_text('{"numStartups": 2}')
    (home / ".claude.json").symlink_to(dotfiles / "claude.json")
    env = agent_env(profile, home)
    result = subprocess.run([sys.executable, "-m", "mcp_memory", "install", "claude-code"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert (home / ".claude.json").is_symlink()
    data = json.loads((dotfiles / "claude.json").read_text())
    assert data["numStartups"] == 2 and data["mcpServers"]["mcp-memory"]["args"] == ["serve"]
