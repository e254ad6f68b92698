"""HermesAgent capture into a real database: the shell hook `install hermes` writes, run exactly as Hermes
runs it, and the `mcp-memory watch hermes` poller, both reading state.db incrementally.

The state.db is built from tests/fixtures/hermes/hermes-state-minimal.SYNTHETIC.sql and written the way
Hermes writes it (README.md of the hermes package, §Capture): WAL mode, one INSERT per message row in
its own transaction, by a connection that stays open while we read.
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from agent_fixtures import FIXTURES
from ruamel.yaml import YAML

from mcp_memory.agents.hermes.capture import read_new

SCHEMA = FIXTURES / "hermes" / "hermes-state-minimal.SYNTHETIC.sql"
SESSION = "20260815_101500_a1b2c3"
INSERT = ("INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, "
          "finish_reason, reasoning, active, compacted) VALUES (?, ?, ?, NULL, NULL, NULL, ?, ?, NULL, 1, 0)")


@pytest.fixture
def hermes_home(tmp_path: Path) -> Path:
    home = tmp_path / "hermes-home"
    home.mkdir()
    return home


@pytest.fixture
def writer(hermes_home: Path) -> Iterator[sqlite3.Connection]:
    """Hermes' own connection: WAL mode, open for the whole test."""
    connection = sqlite3.connect(hermes_home / "state.db", isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.executescript(SCHEMA.read_text())
    yield connection
    connection.close()


def next_turn(writer: sqlite3.Connection, session: str, question: str, answer: str) -> None:
    """One turn as Hermes persists it: each row its own INSERT, in its own transaction."""
    if writer.execute("SELECT 1 FROM sessions WHERE id = ?", (session,)).fetchone() is None:
        writer.execute("INSERT INTO sessions (id, source, model, started_at, cwd, title) VALUES "
                       "(?, 'cli', 'deepseek/deepseek-v4-flash', 1786790000.0, '/home/user/demo', ?)",
                       (session, question[:20]))
    now = time.time()
    writer.execute(INSERT, (session, "user", question, now, None))
    writer.execute(INSERT, (session, "assistant", answer, now + 1, "stop"))


def stored(dsn: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT s.meta->>'native_id', m.payload::text FROM messages m JOIN sessions s USING (session_id) "
            "WHERE s.agent_source = 'hermes' ORDER BY s.session_id, m.seq").fetchall()
    return [(str(native), payload) for native, payload in rows]


def mm(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcp_memory", *args], env=env, capture_output=True, text=True,
                          timeout=120, input=stdin)


def test_read_new_is_exact_and_bounded(writer: sqlite3.Connection, hermes_home: Path) -> None:
    db = hermes_home / "state.db"
    first, cursor = read_new(db, None, limit=3)
    assert [len(s.messages) for s in first] == [3] and cursor == {"v": 1, "after": 103}
    rest, cursor = read_new(db, cursor)
    assert [len(s.messages) for s in rest] == [1] and cursor["after"] == 104
    assert read_new(db, cursor) == ([], cursor)
    next_turn(writer, "20260816_090000_ffee01", "Which port does it use?", "Port 8080.")
    (new,), cursor = read_new(db, cursor)
    assert new.native_id == "20260816_090000_ffee01" and [m.role for m in new.messages] == ["user", "assistant"]
    # the same append_ids as a full read: capture and import never store a row twice
    from mcp_memory.agents import adapter_for

    full = {s.native_id: s for s in adapter_for("hermes").read([db])}
    assert [m.append_id for m in new.messages] == [m.append_id for m in full[new.native_id].messages]
    for crafted in ({"v": 1, "after": "0; DROP"}, {"v": 9, "after": 104}, {"after": -5}):
        assert len(read_new(db, crafted)[0][0].messages) == 4  # not understood: from the start


def installed_hook(env: dict[str, str], hermes_home: Path) -> list[str]:
    done = mm(env, "install", "hermes")
    assert done.returncode == 0, done.stderr
    config = YAML(typ="safe").load((hermes_home / "config.yaml").read_text())
    (entry,) = config["hooks"]["on_session_end"]
    return shlex.split(entry["command"])  # what Hermes does with it: shlex.split, no shell


def test_installed_hook_captures_each_turn_once(profile, fresh_db, writer, hermes_home: Path) -> None:
    env = {**profile, "MCP_MEMORY_DSN": fresh_db, "HERMES_HOME": str(hermes_home)}
    argv = installed_hook(env, hermes_home)
    assert argv[-3:] == ["sync", "hermes", "--hook"]
    payload = json.dumps({"hook_event_name": "on_session_end", "tool_name": None, "tool_input": None,
                          "session_id": SESSION, "cwd": "/home/user/demo", "profile": "default",
                          "extra": {"completed": True, "interrupted": False, "model": "x", "platform": "cli"}})

    def hook() -> None:
        done = subprocess.run(argv, env=env, input=payload, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout == "", done.stderr

    hook()
    first = stored(fresh_db)
    assert [native for native, _ in first] == [SESSION] * 4
    assert "entry point" in first[-1][1]
    hook()  # nothing new: nothing stored
    assert stored(fresh_db) == first
    next_turn(writer, SESSION, "And the tests?", "They live in tests/.")
    next_turn(writer, "20260816_090000_ffee01", "Which port does it use?", "Port 8080.")
    hook()
    after = stored(fresh_db)
    assert len(after) == 8 and after[:4] == first[:4]
    assert sum("Port 8080." in payload for _, payload in after) == 1
    again = json.loads(mm(env, "import", "hermes", str(hermes_home / "state.db"), "--json").stdout)["sessions"]
    assert sum(s["new"] for s in again) == 0  # the hook already stored every row


def test_hook_without_a_state_db_never_fails(profile, fresh_db, tmp_path: Path) -> None:
    env = {**profile, "MCP_MEMORY_DSN": fresh_db, "HERMES_HOME": str(tmp_path / "nothing-here")}
    done = mm(env, "sync", "hermes", "--hook", stdin="{}")
    assert done.returncode == 0 and "no Hermes state.db" in done.stderr
    refused = mm(env, "sync", "hermes")
    assert refused.returncode != 0 and "no Hermes state.db" in refused.stderr


def wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_watcher_captures_as_hermes_writes_and_stops_on_sigterm(profile, fresh_db, hermes_home: Path) -> None:
    env = {**profile, "MCP_MEMORY_DSN": fresh_db, "HERMES_HOME": str(hermes_home)}
    watcher = subprocess.Popen([sys.executable, "-m", "mcp_memory", "watch", "hermes", "--interval", "0.2"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)  # Hermes has not created its store yet: the watcher waits for it
        assert watcher.poll() is None
        connection = sqlite3.connect(hermes_home / "state.db", isolation_level=None)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(SCHEMA.read_text())
            wait_for(lambda: len(stored(fresh_db)) == 4, "the first four rows")
            next_turn(connection, SESSION, "And the tests?", "They live in tests/.")
            wait_for(lambda: len(stored(fresh_db)) == 6, "the next turn")
        finally:
            connection.close()
        time.sleep(1)
        assert len(stored(fresh_db)) == 6  # nothing stored twice
    finally:
        watcher.terminate()  # SIGTERM to this PID only
        try:
            out, err = watcher.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            watcher.kill()
            watcher.communicate()
            raise
    assert watcher.returncode == 0, err
    # each row is its own transaction, so a round may see part of a turn: the rounds add up to six
    assert sum(int(n) for n in re.findall(r": (\d+) new", out)) == 6, out


def unit_words(line: str) -> list[str]:
    """systemd's reading of the double-quoted words our unit writes."""
    words = re.findall(r'"((?:[^"\\]|\\.)*)"', line)
    return [re.sub(r"\\(.)", r"\1", w).replace("%%", "%").replace("$$", "$") for w in words]


def test_service_unit_runs_the_watcher_with_the_profile(profile, fresh_db, writer, tmp_path: Path) -> None:
    """The unit `watch --install-service` writes: its ExecStart and Environment, read the way systemd
    reads them, run one capture round (`--once`) into the same database; odd characters survive."""
    hermes_home = tmp_path / "hermes-home"  # the `writer` fixture's store
    config = tmp_path / "xdg config"
    odd = tmp_path / "50% $HOME \"odd\".toml"  # a config file whose name needs every escape
    odd.write_text("")
    env = {**profile, "MCP_MEMORY_DSN": fresh_db, "HERMES_HOME": str(hermes_home), "XDG_CONFIG_HOME": str(config),
           "MCP_MEMORY_CONFIG": str(odd)}
    done = mm(env, "watch", "hermes", "--interval", "3", "--install-service")
    assert done.returncode == 0, done.stderr
    unit = config / "systemd" / "user" / "mcp-memory-watch-hermes.service"
    assert "systemctl --user enable --now mcp-memory-watch-hermes.service" in done.stdout
    text = unit.read_text()
    assert unit.stat().st_mode & 0o077 == 0
    (exec_line,) = [x for x in text.splitlines() if x.startswith("ExecStart=")]
    argv = unit_words(exec_line)
    assert argv[-6:] == ["watch", "hermes", "--interval", "3", "--path", str((hermes_home / "state.db").resolve())]
    variables = dict(unit_words(x)[0].split("=", 1) for x in text.splitlines() if x.startswith("Environment="))
    assert variables["MCP_MEMORY_CONFIG"] == env["MCP_MEMORY_CONFIG"] and "MCP_MEMORY_DSN" in variables
    assert variables["MCP_MEMORY_HOME"] == profile["MCP_MEMORY_HOME"]
    service_env = {k: v for k, v in profile.items() if not k.startswith("MCP_MEMORY_")}
    service_env.update(variables)
    ran = subprocess.run([*argv, "--once"], env=service_env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and "4 new" in ran.stdout, ran.stderr
    assert len(stored(fresh_db)) == 4
    removed = mm(env, "watch", "hermes", "--remove-service")
    assert removed.returncode == 0 and not unit.exists()
