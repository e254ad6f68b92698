"""Restore keeps who wrote what and knows what is archived: two hosts' tokens write, an archiver token
exports, `mcp-memory restore --from-archive` (the CLI, as the owner) rebuilds another database. Every
message keeps its `written_by` (carried on its archive line); an archive from before the field
restores as before and the report counts the messages without an author; the restored sessions count
as archived (`archive status`, `/metrics`: lag 0); and a token can neither restore nor set an author."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from archive_support import archive_lines, db_rows, git, messages, second_db  # noqa: F401  (fixtures)
from rest_support import Server
from security_support import connect_as, make_token, owner_db, password_server, token_service  # noqa: F401
from test_metrics import scrape

from mcp_memory.core.service import Service
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.wiring import build

AUTHORS = "SELECT session_id, seq, written_by FROM messages ORDER BY session_id, seq"


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`mcp-memory …` as a user runs it: its own process, its own environment."""
    return subprocess.run([sys.executable, "-m", "mcp_memory", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


@pytest.fixture
def two_hosts(service: Service, settings, make_token, profile: dict[str, str], tmp_path: Path):  # noqa: F811
    """Hosts A and B (tokens) write into one session each and into a shared one, the owner writes too,
    every session is snapshotted, and an archiver token exports it all with the CLI."""
    hosts = [make_token("host_a", ["P"]), make_token("host_b", ["P"])]
    sessions = []
    for created in hosts:
        host = token_service(settings, created)
        try:
            own = host.create_session("P", {"title": created.name})
            host.append_messages(own.session_id, messages(3, created.name))
            sessions.append(own.session_id)
        finally:
            host.db.close()
    shared = service.create_session("P", {"title": "shared"})
    service.append_messages(shared.session_id, messages(1, "owner"))
    for created in hosts:
        host = token_service(settings, created)
        try:
            host.append_messages(shared.session_id, messages(2, f"{created.name}-shared"))
        finally:
            host.db.close()
    for sid in [*sessions, shared.session_id]:
        service.create_snapshot(sid, "for the archive")
    archiver = make_token("archiver", None, archiver=True)
    repo = tmp_path / "archive"
    env = {**profile, "MCP_MEMORY_DSN": archiver.dsn, "MCP_MEMORY_PASSWORD": archiver.token}
    done = _cli(env, "archive", "--once", "--repo", str(repo))
    assert done.returncode == 0, done.stderr
    return hosts, repo, shared.session_id


def _restore(profile: dict[str, str], dsn: str, repo: Path) -> dict:
    done = _cli(profile, "--dsn", dsn, "restore", "--from-archive", str(repo), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict = json.loads(done.stdout)
    return report


def test_restore_keeps_every_message_author(two_hosts, settings, second_db: str,  # noqa: F811
                                            profile: dict[str, str]) -> None:
    hosts, repo, shared = two_hosts
    before = db_rows(settings.dsn, AUTHORS)
    names = {created.name for created in hosts}
    assert names <= {row[2] for row in before}  # the hosts' own names, not the owner's
    assert [line["written_by"] for line in archive_lines(repo, shared)] == [row[2] for row in before if row[0] == shared]

    report = _restore(profile, second_db, repo)
    assert (report["ok"], report["messages"], report["messages_without_author"]) == (True, len(before), 0)
    assert db_rows(second_db, AUTHORS) == before
    restored_shared = [row[2] for row in db_rows(second_db, AUTHORS) if row[0] == shared]
    assert len(set(restored_shared)) == 3  # the owner and both hosts, each on the lines it wrote


def test_an_archive_without_authors_restores_as_before_and_says_how_many(two_hosts, second_db: str,  # noqa: F811
                                                                         profile: dict[str, str]) -> None:
    _, repo, _ = two_hosts
    # the archive as an older archiver wrote it: the same lines without written_by
    for path in sorted((repo / "sessions").glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "written_by"},
                                           ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines))
    git(repo, "commit", "-qam", "an archive from before written_by")
    total = sum(len(p.read_text().splitlines()) for p in (repo / "sessions").glob("*.jsonl"))

    done = _cli(profile, "--dsn", second_db, "restore", "--from-archive", str(repo))
    assert done.returncode == 0, done.stderr
    owner = db_rows(second_db, "SELECT current_user")[0][0]
    assert f"{total} message(s) had no author recorded in the archive" in done.stdout
    assert f"written_by is {owner} for them" in done.stdout
    assert {row[2] for row in db_rows(second_db, AUTHORS)} == {owner}
    assert len(db_rows(second_db, AUTHORS)) == total


def test_a_bad_author_on_a_line_is_named_and_the_rest_restored(two_hosts, second_db: str,  # noqa: F811
                                                               profile: dict[str, str]) -> None:
    _, repo, shared = two_hosts
    path = repo / "sessions" / f"{shared}.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[2]["written_by"] = 42
    lines[3]["written_by"] = "x" * 201
    path.write_text("".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines))
    git(repo, "commit", "-qam", "a crafted author")

    done = _cli(profile, "--dsn", second_db, "restore", "--from-archive", str(repo), "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 1 and not report["ok"]
    assert [(b["file"], b["line"]) for b in report["bad_lines"]] == [(f"sessions/{shared}.jsonl", 3)]
    assert "written_by must be a string of 1 to 200 characters" in report["bad_lines"][0]["why"]
    assert db_rows(second_db, "SELECT max(seq) FROM messages WHERE session_id = %s", shared) == [(2,)]


def test_restored_sessions_count_as_archived(two_hosts, settings, second_db: str,  # noqa: F811
                                             profile: dict[str, str]) -> None:
    _, repo, _ = two_hosts
    report = _restore(profile, second_db, repo)
    done = _cli(profile, "--dsn", second_db, "archive", "status", "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["not_archived"] == {"sessions": 0, "messages": 0, "lag_seconds": 0.0}
    assert status["jobs"] == {"pending": 0, "running": 0, "done": report["snapshots"], "failed": 0}
    registry = TokenRegistry(replace(settings, dsn=second_db), second_db,
                             lambda s: build(s, application_name="mcp-memory restore-test"), recheck_seconds=0)
    with Server(create_app(registry, HttpOptions(rate_limit=0))) as server:
        samples = scrape(server.url)
    assert samples["mcp_memory_archive_lag_seconds"] == 0
    assert samples["mcp_memory_archive_unarchived_sessions"] == 0
    assert samples["mcp_memory_export_queue_depth"] == 0
    # new work after the restore is not archived until its snapshot is: the lag is real again
    with psycopg.connect(second_db) as conn:
        sid = conn.execute("SELECT session_id FROM sessions ORDER BY session_id LIMIT 1").fetchone()[0]  # type: ignore[index]
    service = build(replace(settings, dsn=second_db, auto_migrate=False))
    try:
        service.append_messages(sid, messages(1, "after"))
    finally:
        service.db.close()
    status = json.loads(_cli(profile, "--dsn", second_db, "archive", "status", "--json").stdout)
    assert (status["not_archived"]["sessions"], status["not_archived"]["messages"]) == (1, 1)


def test_a_token_restores_nothing_and_sets_no_author(two_hosts, settings,
                                                     profile: dict[str, str]) -> None:
    hosts, repo, shared = two_hosts
    intruder = hosts[0]
    env = {**profile, "MCP_MEMORY_DSN": intruder.dsn, "MCP_MEMORY_PASSWORD": intruder.token}
    before = db_rows(settings.dsn, AUTHORS)
    done = _cli(env, "restore", "--from-archive", str(repo), "--force")
    assert done.returncode == 1 and "permission denied" in done.stderr.lower(), done.stdout + done.stderr
    assert db_rows(settings.dsn, AUTHORS) == before
    with connect_as(intruder, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE messages SET written_by = 'someone' WHERE session_id = %s", (shared,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, "
                         "created_at, written_by, part_month) SELECT session_id, 99, project_id, 'forged', 'user', "
                         "'{}', '\\x00', now(), 'someone', part_month FROM sessions WHERE session_id = %s", (shared,))
        # a payload naming an author is only a payload: the database records the caller
        forged = json.dumps({"role": "user", "content": "hi", "written_by": "someone"})
        conn.execute("SELECT * FROM mm_append(%s, ARRAY['forged-author'], ARRAY['user'], ARRAY[%s], NULL, NULL)",
                     (shared, forged))
    assert db_rows(settings.dsn, "SELECT written_by FROM messages WHERE append_id = 'forged-author'") == \
        [(intruder.name,)]


def test_the_restore_checklist_names_what_is_still_to_redo(two_hosts, second_db: str,  # noqa: F811
                                                           profile: dict[str, str]) -> None:
    _, repo, _ = two_hosts
    _restore(profile, second_db, repo)
    script = Path(__file__).resolve().parents[3] / "scripts" / "restore_checklist.py"
    done = subprocess.run([sys.executable, str(script), "--dsn", second_db, "--json"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    states = {row["name"]: row["state"] for row in json.loads(done.stdout)["checks"]}
    # a new database: the restore brought no tokens, no archiver; the archive lag is already nothing
    assert states["tokens"] == states["archiver"] == states["archiver_running"] == "todo"
    assert states["archive_lag"] == "ok"
    assert {states[k] for k in ("logins", "agents", "serve_http")} == {"by hand"}
    with psycopg.connect(second_db, autocommit=True) as conn:  # the same database once tokens exist
        conn.execute("INSERT INTO access_tokens (role_name, token_sha256) VALUES (current_user, '\\x00')")
    after = json.loads(subprocess.run([sys.executable, str(script), "--dsn", second_db, "--json"],
                                      capture_output=True, text=True, timeout=120, check=False).stdout)
    assert {row["name"]: row["state"] for row in after["checks"]}["tokens"] == "ok"
