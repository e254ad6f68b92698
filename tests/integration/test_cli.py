"""The CLI as a user runs it: exit codes, one-line errors, --json, demo."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import embedded_home

from mcp_memory.store import embedded


def run(env: dict[str, str], *args: str, dsn: str | None = None) -> subprocess.CompletedProcess:
    full = [sys.executable, "-m", "mcp_memory", *(["--dsn", dsn] if dsn else []), *args]
    return subprocess.run(full, env=env, capture_output=True, text=True, timeout=120)


def test_snapshot_fork_sessions_show(profile, fresh_db, service) -> None:
    sid = service.create_session("cli", {"title": "CLI test"}).session_id
    service.append_messages(sid, [{"append_id": "1", "role": "user", "content": "hello cli"}])
    snap = json.loads(run(profile, "snapshot", sid, "-m", "first", "--json", dsn=fresh_db).stdout)
    assert snap["up_to_seq"] == 1
    text = run(profile, "snapshot", sid, "-m", "second", dsn=fresh_db).stdout
    assert text.startswith(f"snapshot {snap['snapshot_id'] + 1}: {sid} up to seq 1")
    forked = json.loads(run(profile, "fork", str(snap["snapshot_id"]), "--agent", "codex", "--json", dsn=fresh_db).stdout)
    assert forked["parent_snapshot_id"] == snap["snapshot_id"]
    listing = json.loads(run(profile, "sessions", "--project", "cli", "--json", dsn=fresh_db).stdout)
    assert {s["session_id"] for s in listing["sessions"]} == {sid, forked["session_id"]}
    shown = run(profile, "show", forked["session_id"], dsn=fresh_db)
    assert "#1 user (inherited): hello cli" in shown.stdout
    full = run(profile, "show", forked["session_id"], "--view", "full", dsn=fresh_db)
    assert "#1 user (inherited): hello cli" in full.stdout
    as_json = json.loads(run(profile, "show", forked["session_id"], "--json", dsn=fresh_db).stdout)
    assert as_json["session"]["fork_seq"] == 1 and as_json["messages"][0] == {
        "seq": 1, "role": "user", "content": "hello cli", "created_at": as_json["messages"][0]["created_at"]}


def test_user_errors_exit_1_with_one_line(profile, fresh_db) -> None:
    result = run(profile, "snapshot", "ses_00000000-0000-0000-0000-000000000000", "-m", "x", dsn=fresh_db)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "mcp-memory: [not_found] session ses_00000000-0000-0000-0000-000000000000 does not exist"]
    down = run(profile, "sessions", dsn="postgresql://someone:hunter2@127.0.0.1:1/x?connect_timeout=1")
    assert down.returncode == 1 and "[unavailable]" in down.stderr and "hunter2" not in down.stderr


def test_usage_errors_exit_2(profile) -> None:
    assert run(profile, "no-such-command").returncode == 2
    assert run(profile, "fork").returncode == 2


def test_an_unknown_option_is_named_not_taken_for_a_sub_command(profile) -> None:
    result = run(profile, "archive", "--daemon", "--no-such-option", "1")
    assert result.returncode == 2
    assert "unrecognized option --no-such-option" in result.stderr and "invalid choice" not in result.stderr
    typo = run(profile, "archive", "stauts", "--json")  # a mistyped action is still called that
    assert typo.returncode == 2 and "invalid choice: 'stauts'" in typo.stderr


def test_export_to_a_target_that_cannot_be_written_exits_1(profile, fresh_db, service, tmp_path) -> None:
    s = service.create_session("p", {"title": "to export"})
    service.append_messages(s.session_id, [{"role": "user", "content": "hi", "append_id": "a1"}])
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = run(profile, "export", s.session_id, "--to", "opencode", "--out", str(blocker / "inside"), dsn=fresh_db)
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("mcp-memory: [") and str(blocker) in line


def test_schema_prints_json_schema(profile) -> None:
    schema = json.loads(run(profile, "schema").stdout)
    assert schema["properties"]["role"]["enum"] == ["system", "user", "assistant", "tool"]


def test_db_status_and_migrate(profile, fresh_db) -> None:
    status = json.loads(run(profile, "db", "status", "--json", dsn=fresh_db).stdout)
    assert status["migrations"] and all(m["applied_at"] for m in status["migrations"])
    assert "already up to date" in run(profile, "db", "migrate", dsn=fresh_db).stdout


def test_doctor_json_shape_and_masked_password(profile, fresh_db) -> None:
    doctor = json.loads(run(profile, "doctor", "--json", dsn=fresh_db).stdout)
    assert set(doctor["database"]) >= {"kind", "dsn", "server_version", "schema_version", "pgvector"}
    assert doctor["database"]["kind"] == "external"
    assert {c["name"] for c in doctor["checks"]} >= {"config", "database", "schema", "pgvector", "keyring"}
    bad = run(profile, "doctor", "--json", dsn="postgresql://u:topsecret@127.0.0.1:1/x?connect_timeout=1")
    assert bad.returncode == 1
    report = json.loads(bad.stdout)
    assert report["database"]["dsn"] == "postgresql://u:***@127.0.0.1:1/x?connect_timeout=1"
    assert "topsecret" not in bad.stdout + bad.stderr
    assert any(not c["ok"] and c["name"] == "database" for c in report["checks"])


def test_demo_on_the_embedded_default(profile) -> None:
    with embedded_home() as home:
        env = {**profile, "MCP_MEMORY_HOME": str(home)}
        try:
            first = run(env, "demo")
            assert first.returncode == 0, first.stderr
            assert "database: the embedded PostgreSQL" in first.stdout
            assert "duplicate=True" in first.stdout and "claude mcp add -s user mcp-memory" in first.stdout
            assert "#5 user: Add the timeout and rerun the test." in first.stdout
            fork = first.stdout.split("fork (OpenCode)")[1]  # every inherited turn is labelled
            assert [line.strip()[:2] for line in fork.splitlines() if "(inherited)" in line] == ["#1", "#2", "#3", "#4"]
            assert run(env, "demo").returncode == 0  # again, attaching to the running server
        finally:
            embedded.stop(home / "mcp-memory" / "pg")


def test_doctor_shows_the_search_backlog_and_reindex_clears_it(profile, fresh_db, settings) -> None:
    """A process killed between its append and its indexing pass: doctor counts what is not
    indexed, `reindex --json` indexes it, and the backlog is gone."""
    from mcp_memory.wiring import build

    dying = build(settings)
    dying.indexer.submit = lambda session_id: None  # it never gets to index
    try:
        sid = dying.create_session("cli").session_id
        dying.append_messages(sid, [{"role": "user", "content": f"turn {i}"} for i in range(3)])
    finally:
        dying.db.close()
    doctor = json.loads(run(profile, "doctor", "--json", dsn=fresh_db).stdout)
    assert doctor["database"]["search_backlog"] == {"sessions": 1, "messages": 3}
    assert json.loads(run(profile, "reindex", "--json", dsn=fresh_db).stdout) == {"indexed": 3}
    doctor = json.loads(run(profile, "doctor", "--json", dsn=fresh_db).stdout)
    assert doctor["database"]["search_backlog"] == {"sessions": 0, "messages": 0}
    assert "indexed 0 message(s)" in run(profile, "reindex", dsn=fresh_db).stdout
