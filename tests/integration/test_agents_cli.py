"""import / export / sync / install through the CLI, on real agent files and a real database."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

SHARED = FIXTURES
CLAUDE = SHARED / "claude-code"


def run(env, *args, dsn=None, stdin=None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mcp_memory", *(["--dsn", dsn] if dsn else []), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, input=stdin)


def test_import_is_idempotent_and_reports(profile, fresh_db) -> None:
    first = run(profile, "import", "claude-code", str(CLAUDE), "--project", "p", "--json", dsn=fresh_db)
    assert first.returncode == 0, first.stderr
    sessions = json.loads(first.stdout)["sessions"]
    assert len(sessions) >= 5
    for s in sessions:
        assert set(s) >= {"session_id", "native_id", "agent", "messages", "report"}
        assert s["new"] == s["messages"] and s["agent"] == "claude-code"
    again = json.loads(run(profile, "import", "claude-code", str(CLAUDE), "--project", "p", "--json",
                           dsn=fresh_db).stdout)["sessions"]
    assert [s["session_id"] for s in again] == [s["session_id"] for s in sessions]
    assert all(s["new"] == 0 and s["duplicates"] == s["messages"] for s in again)
    text = run(profile, "import", "claude-code", str(CLAUDE), "--project", "p", dsn=fresh_db).stdout
    assert "already stored" in text and "×" in text  # the mapping report is printed


def test_import_errors(profile, fresh_db, tmp_path) -> None:
    missing = run(profile, "import", "claude-code", str(tmp_path / "nope"), dsn=fresh_db)
    assert missing.returncode == 1 and "no such file or folder" in missing.stderr
    assert run(profile, "import", "not-an-agent", str(tmp_path), dsn=fresh_db).returncode == 2


def _biggest_session(profile, dsn) -> str:
    listing = json.loads(run(profile, "sessions", "--project", "p", "--json", dsn=dsn).stdout)["sessions"]
    return max(listing, key=lambda s: s["last_seq"])["session_id"]


def test_export_install_into_claude_home_and_relay_to_opencode(profile, fresh_db, tmp_path) -> None:
    run(profile, "import", "claude-code", str(CLAUDE), "--project", "p", dsn=fresh_db)
    sid = _biggest_session(profile, fresh_db)
    home = tmp_path / "home"
    env = {**profile, "HOME": str(home)}
    env.pop("CLAUDE_CONFIG_DIR", None)
    work = tmp_path / "work"
    work.mkdir()
    out = run(env, "export", sid, "--to", "claude-code", "--install", "--cwd", str(work), "--json", dsn=fresh_db)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    written = Path(result["files"][0])
    assert written.is_relative_to(home / ".claude" / "projects")
    assert written.parent.name == str(work).replace("/", "-").replace("_", "-").replace(".", "-")
    assert "claude --resume" in result["resume_command"]
    lines = [json.loads(line) for line in written.read_text().splitlines()]
    assert any(line.get("entrypoint") == "cli" for line in lines)

    folder = tmp_path / "oc"
    relay = run(profile, "export", sid, "--to", "opencode", "--out", str(folder), "--json", dsn=fresh_db)
    assert relay.returncode == 0, relay.stderr
    back = json.loads(run(profile, "import", "opencode", str(folder), "--project", "relay", "--json",
                          dsn=fresh_db).stdout)["sessions"]
    # the exported file read back is the relay itself: a fork of the source at the exported seq with
    # no turns of its own yet (tests/integration/test_relays.py continues one)
    assert back and back[0]["new"] == 0 and back[0]["relayed_from"]["session_id"] == sid
    original = json.loads(run(profile, "show", sid, "--json", dsn=fresh_db).stdout)["messages"]
    relayed = json.loads(run(profile, "show", back[0]["session_id"], "--json", dsn=fresh_db).stdout)["messages"]
    relayed_text = "\n".join(_texts(relayed))
    for m in original:
        if m["role"] in ("user", "assistant") and isinstance(m.get("content"), str) and m["content"].strip():
            assert m["content"].strip()[:60] in relayed_text


def _texts(messages: list[dict]) -> list[str]:
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        for part in content if isinstance(content, list) else []:
            out.append(part.get("text", ""))
    return out


def test_sync_hook_incremental_and_spooled_when_database_is_down(profile, fresh_db, tmp_path) -> None:
    source = max(CLAUDE.glob("*.jsonl"), key=lambda p: p.stat().st_size)
    lines = source.read_text().splitlines(keepends=True)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("".join(lines[: len(lines) // 2]))
    hook = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript), "session_id": "x",
                       "cwd": str(tmp_path)})
    first = run(profile, "sync", "claude-code", "--hook", "--project", "s", dsn=fresh_db, stdin=hook)
    assert first.returncode == 0, first.stderr
    count1 = _messages_in_project(profile, fresh_db, "s")
    assert count1 > 0

    with open(transcript, "a") as fh:  # the agent went on while the database was down
        fh.write("".join(lines[len(lines) // 2:]))
    down = "postgresql://x@127.0.0.1:1/none?connect_timeout=1"
    offline = run(profile, "sync", "claude-code", "--hook", "--project", "s", dsn=down, stdin=hook)
    assert offline.returncode == 0 and offline.stdout == ""  # never fails the agent
    spool = Path(profile["MCP_MEMORY_HOME"]) / "mcp-memory" / "spool"
    assert len(list(spool.glob("*.json"))) == 1

    back = run(profile, "sync", "claude-code", "--hook", "--project", "s", dsn=fresh_db, stdin=hook)
    assert back.returncode == 0, back.stderr
    assert not list(spool.glob("*.json"))
    full = json.loads(run(profile, "import", "claude-code", str(source), "--project", "s", "--json",
                          dsn=fresh_db).stdout)["sessions"]
    assert sum(s["new"] for s in full) == 0  # everything was captured by the hooks already
    assert _messages_in_project(profile, fresh_db, "s") > count1


def _messages_in_project(profile, dsn, project) -> int:
    listing = json.loads(run(profile, "sessions", "--project", project, "--json", dsn=dsn).stdout)["sessions"]
    return sum(s["last_seq"] for s in listing)


def test_sync_hook_with_garbage_never_fails(profile, fresh_db) -> None:
    result = run(profile, "sync", "claude-code", "--hook", dsn=fresh_db, stdin="{not json")
    assert result.returncode == 0 and "mcp-memory sync:" in result.stderr


def test_install_claude_code_project_scope_is_idempotent(profile, tmp_path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    env = {**profile, "HOME": str(tmp_path / "home")}
    first = run(env, "install", "claude-code", "--scope", "project", "--cwd", str(project))
    assert first.returncode == 0, first.stderr
    config = json.loads((project / ".mcp.json").read_text())
    assert set(config["mcpServers"]) == {"other", "mcp-memory"}
    assert config["mcpServers"]["mcp-memory"]["args"][-1] == "serve"
    again = run(env, "install", "claude-code", "--scope", "project", "--cwd", str(project))
    assert "nothing to change" in again.stdout
    run(env, "install", "claude-code", "--scope", "project", "--cwd", str(project), "--uninstall")
    assert set(json.loads((project / ".mcp.json").read_text())["mcpServers"]) == {"other"}
    assert shutil.which(sys.executable)


@pytest.mark.parametrize("agent", ["claude-code", "opencode", "codex", "gemini", "hermes"])
def test_install_every_agent_user_scope_through_the_cli(profile, tmp_path, agent) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**profile, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "CODEX_HOME": str(home / ".codex")}
    for key in ("CLAUDE_CONFIG_DIR", "HERMES_HOME", "GEMINI_CLI_HOME", "XDG_DATA_HOME"):
        env.pop(key, None)
    first = run(env, "install", agent)
    assert first.returncode == 0, first.stderr
    written = [p for p in home.rglob("*") if p.is_file()]
    assert written and all("mcp-memory" in p.read_text() for p in written if p.suffix != ".js")
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    assert run(env, "install", agent).returncode == 0
    assert {p: p.read_bytes() for p in home.rglob("*") if p.is_file()} == before  # idempotent
    assert run(env, "install", agent, "--uninstall").returncode == 0
    assert all("mcp-memory serve" not in p.read_text() for p in home.rglob("*") if p.is_file())


def test_a_relay_installed_on_another_host_resumes_in_that_hosts_folder(profile, fresh_db, tmp_path) -> None:
    """The session was recorded on host A in a folder host B does not have: `export --install` on B
    installs it for B's current folder (or --cwd), and says so; the resume line `cd`s there."""
    run(profile, "import", "claude-code", str(CLAUDE), "--project", "p", dsn=fresh_db)
    sid = _biggest_session(profile, fresh_db)
    recorded = json.loads(run(profile, "show", sid, "--json", dsn=fresh_db).stdout)["session"]["cwd"]
    assert recorded and not Path(recorded).exists()  # a folder of the machine that recorded the fixture
    here = tmp_path / "host-b checkout"
    here.mkdir()
    env = {**profile, "HOME": str(tmp_path / "home")}
    env.pop("CLAUDE_CONFIG_DIR", None)
    out = subprocess.run([sys.executable, "-m", "mcp_memory", "--dsn", fresh_db, "export", sid, "--to",
                          "claude-code", "--install", "--json"], env=env, capture_output=True, text=True,
                         timeout=120, cwd=here)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["cwd"], result["cwd_rule"]) == (str(here), "here")
    assert "not on this host" in out.stderr and recorded in out.stderr
    assert str(here) in result["resume_command"] and recorded not in result["resume_command"]
    given = tmp_path / "elsewhere"
    given.mkdir()
    chosen = json.loads(run(env, "export", sid, "--to", "claude-code", "--install", "--cwd", str(given), "--json",
                            dsn=fresh_db).stdout)
    assert (chosen["cwd"], chosen["cwd_rule"]) == (str(given), "given") and str(given) in chosen["resume_command"]
