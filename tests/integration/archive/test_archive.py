"""Git archive end to end on real PostgreSQL and real git repositories (in-process `archive --once`):
layout, commits and tags, push failures and retry, status, verify, restore round trip."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from archive_support import archive_lines, bare_remote, db_rows, git, job_states, messages

from mcp_memory.archive import layout
from mcp_memory.cli import main
from mcp_memory.core.service import Service
from mcp_memory.errors import Unavailable
from mcp_memory.wiring import build

pytest_plugins = ["archive_support"]  # the fixtures `cli` and `second_db`


def test_once_exports_layout_commits_tags_and_pushes(service: Service, cli, tmp_path: Path, settings) -> None:
    s = service.create_session("proj", {"title": "main work", "agent_source": "claude-code"})
    service.append_messages(s.session_id, messages(5))
    first = service.create_snapshot(s.session_id, "first five")
    fork = service.load_snapshot(first.snapshot_id, {"title": "fork"})
    service.append_messages(fork.session_id, messages(2, "f"))
    fork_snap = service.create_snapshot(fork.session_id, "fork work")
    empty = service.create_snapshot(s.session_id, "nothing new")
    remote = bare_remote(tmp_path)
    repo = tmp_path / "new" / "archive"

    assert cli("archive", "--once", "--repo", str(repo), "--remote", str(remote)) == 0

    assert "## Restore" in (repo / "README.md").read_text()
    parent_lines = archive_lines(repo, s.session_id)
    assert [x["seq"] for x in parent_lines] == [1, 2, 3, 4, 5]
    stored = service.read_session(s.session_id, view="full").messages
    assert [x["append_id"] for x in parent_lines] == [m.append_id for m in stored]
    assert parent_lines[0]["content"] == "m 0 héllo 你好" and parent_lines[0]["session_id"] == s.session_id
    assert {"append_id", "seq", "session_id", "role", "created_at", "schema_version"} <= set(parent_lines[0])
    assert [x["seq"] for x in archive_lines(repo, fork.session_id)] == [6, 7]  # only the fork's own
    meta = json.loads((repo / layout.meta_path(fork.session_id)).read_text())
    assert (meta["parent_session_id"], meta["fork_seq"], meta["parent_snapshot_id"]) == (s.session_id, 5, first.snapshot_id)
    subjects = git(repo, "log", "--reverse", "--format=%s").splitlines()
    assert subjects[1:] == [f"snapshot {first.snapshot_id}: {s.session_id} up to seq 5",
                            f"snapshot {fork_snap.snapshot_id}: {fork.session_id} up to seq 7",
                            f"snapshot {empty.snapshot_id}: {s.session_id} up to seq 5"]
    assert "first five" in git(repo, "log", "-1", "--format=%B", f"snapshot-{first.snapshot_id}")
    assert git(repo, "cat-file", "-t", f"snapshot-{empty.snapshot_id}").strip() == "tag"  # annotated
    assert sorted(git(remote, "tag").split()) == sorted(f"snapshot-{i}" for i in (1, 2, 3))
    assert git(remote, "rev-parse", "main") == git(repo, "rev-parse", "main")
    assert {state for state, _, _ in job_states(settings.dsn).values()} == {"done"}
    with psycopg.connect(settings.dsn) as conn:  # each job names the commit its tag points at
        recorded = dict(conn.execute("SELECT snapshot_id, commit_sha FROM export_jobs").fetchall())
    assert recorded == {i: git(repo, "rev-parse", f"snapshot-{i}^{{commit}}").strip() for i in (1, 2, 3)}

    head = git(repo, "rev-parse", "main")
    assert cli("archive", "--once", "--repo", str(repo), "--remote", str(remote)) == 0
    assert git(repo, "rev-parse", "main") == head  # nothing pending: nothing written


def test_meta_file_is_rewritten_only_when_the_meta_changed(service: Service, cli, tmp_path: Path) -> None:
    s = service.create_session("proj", {"title": "one"})
    service.append_messages(s.session_id, messages(1))
    service.create_snapshot(s.session_id, "a")
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    service.append_messages(s.session_id, messages(1, "x"))
    service.create_snapshot(s.session_id, "b")
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    assert git(repo, "show", "--name-only", "--format=", "snapshot-2^{commit}").split() == [layout.session_path(s.session_id)]
    service.update_session_meta(s.session_id, {"title": "two"})
    service.create_snapshot(s.session_id, "c")
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    assert git(repo, "show", "--name-only", "--format=", "snapshot-3^{commit}").split() == [layout.meta_path(s.session_id)]
    assert json.loads((repo / layout.meta_path(s.session_id)).read_text())["title"] == "two"


def test_push_failure_retries_then_fails_and_retry_requeues(service: Service, cli, tmp_path: Path, settings,
                                                           capsys: pytest.CaptureFixture) -> None:
    """A remote that refuses (permission denied by a hook), then is gone, then recovers."""
    config = {"max_attempts": 2, "retry_base": 0.0, "retry_jitter": 0.0}
    remote = bare_remote(tmp_path)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'permission denied' >&2\nexit 1\n")
    hook.chmod(0o755)
    repo = tmp_path / "archive"
    s = service.create_session("proj")
    service.append_messages(s.session_id, messages(3))
    snap = service.create_snapshot(s.session_id, "one")

    capsys.readouterr()
    assert cli("archive", "--once", "--repo", str(repo), "--remote", str(remote), config=config) == 1
    assert "0 job(s) failed, 1 left to retry" in capsys.readouterr().err  # the snapshot is not on the remote
    state, attempts, error = job_states(settings.dsn)[snap.snapshot_id]
    assert (state, attempts) == ("pending", 1) and "permission denied" in error
    service.append_messages(s.session_id, messages(1, "later"))
    later = service.create_snapshot(s.session_id, "two")  # commits are not blocked by the failing push
    remote.rename(tmp_path / "gone.git")
    assert cli("archive", "--once", "--repo", str(repo), "--remote", str(remote), config=config) == 1
    assert "1 job(s) failed, 1 left to retry" in capsys.readouterr().err
    jobs = job_states(settings.dsn)
    assert jobs[snap.snapshot_id][:2] == ("failed", 2)
    assert jobs[later.snapshot_id][:2] == ("pending", 1)
    assert git(repo, "tag").split() == [f"snapshot-{snap.snapshot_id}", f"snapshot-{later.snapshot_id}"]

    capsys.readouterr()
    assert cli("archive", "status", "--json") == 0
    status = json.loads(capsys.readouterr().out)
    assert status["jobs"]["failed"] == 1 and status["queue_depth"] == 1
    assert status["failed"][0]["job_id"] and status["failed"][0]["last_error"]
    assert status["oldest_pending"]["snapshot_id"] == later.snapshot_id

    (tmp_path / "gone.git").rename(remote)
    hook.unlink()
    assert cli("archive", "retry", "--failed") == 0
    assert "re-queued 1 job(s)" in capsys.readouterr().out
    assert cli("archive", "--once", "--repo", str(repo), "--remote", str(remote), config=config) == 0
    assert {state for state, _, _ in job_states(settings.dsn).values()} == {"done"}
    assert sorted(git(remote, "tag").split()) == [f"snapshot-{snap.snapshot_id}", f"snapshot-{later.snapshot_id}"]
    assert git(repo, "log", "--format=%s").count(f"snapshot {snap.snapshot_id}:") == 1  # one commit per snapshot

    assert cli("archive", "retry", "--job", "999") == 1
    assert "[not_found]" in capsys.readouterr().err
    assert cli("archive", "retry", "--job", "1") == 1  # done jobs are not re-queued
    assert cli("archive", "status") == 0
    assert "0 waiting" in capsys.readouterr().out


def test_verify_detects_a_tampered_archive(service: Service, cli, tmp_path: Path, capsys) -> None:
    s = service.create_session("proj")
    service.append_messages(s.session_id, messages(4))
    service.create_snapshot(s.session_id, "one")
    other = service.create_session("proj")
    service.append_messages(other.session_id, messages(2, "o"))
    service.create_snapshot(other.session_id, "two")
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    capsys.readouterr()
    assert cli("archive", "verify", "--repo", str(repo)) == 0
    assert "archive matches the database: 2 session(s), 6 line(s)" in capsys.readouterr().out

    path = repo / layout.session_path(s.session_id)
    path.write_text(path.read_text().replace("m 2 héllo", "m 2 forged"))
    other_path = repo / layout.session_path(other.session_id)
    other_path.write_text(other_path.read_text().splitlines(keepends=True)[0])
    git(repo, "commit", "-qam", "tamper")
    git(repo, "tag", "-d", "snapshot-2")
    assert cli("archive", "--repo", str(repo), "verify") == 1
    out = capsys.readouterr().out
    assert f"{layout.session_path(s.session_id)}:3: content does not match" in out
    assert f"{other.session_id}: archive reaches seq 1, but snapshots up to seq 2" in out
    assert "tag(s) missing for exported snapshot(s) snapshot-2" in out

    assert cli("archive", "verify", "--json", "--repo", str(repo)) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False


def test_restore_round_trip_equals_the_original(service: Service, cli, tmp_path: Path, settings, second_db: str,
                                                capsys) -> None:
    s = service.create_session("proj", {"title": "orig", "agent_source": "opencode", "cwd": "/w"})
    service.append_messages(s.session_id, [
        {"role": "system", "content": "be brief", "append_id": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}],
         "append_id": "u1", "created_at": "2025-03-01T10:00:00.123456Z", "metadata": {"model": "m", "n": 1.5}},
        {"role": "assistant", "content": None, "append_id": "a1",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"p\": 1}"}}],
         "thinking": {"content": "hmm", "encrypted": False}},
        {"role": "tool", "tool_call_id": "c1", "content": "ok", "append_id": "t1"},
    ])
    first = service.create_snapshot(s.session_id, "before fork\n\nwith body")
    fork = service.load_snapshot(first.snapshot_id, {"title": "forked"})
    service.append_messages(fork.session_id, messages(3, "f"))
    service.create_snapshot(fork.session_id, "fork snap")
    service.append_messages(s.session_id, messages(2, "late"))
    service.create_snapshot(s.session_id, "after")
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0

    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo)]) == 0
    assert "restored 2 session(s), 9 message(s), 3 snapshot(s)" in capsys.readouterr().out

    session_cols = "session_id, project_id, agent_source, title, meta, last_seq, parent_session_id, fork_seq, " \
                   "parent_snapshot_id, created_by, created_at"
    for sql in (f"SELECT {session_cols} FROM sessions ORDER BY session_id",
                ("SELECT session_id, seq, project_id, append_id, role, payload, payload_hash, created_at FROM messages "
                 "ORDER BY session_id, seq"),
                ("SELECT snapshot_id, session_id, project_id, up_to_seq, commit_msg, meta, created_by, created_at "
                 "FROM snapshots ORDER BY snapshot_id")):
        assert db_rows(second_db, sql) == db_rows(settings.dsn, sql), sql

    restored = build(replace(settings, dsn=second_db))
    try:
        assert restored.read_session(fork.session_id, view="full").messages == service.read_session(fork.session_id, view="full").messages
        again = restored.append_message(s.session_id, {"role": "tool", "tool_call_id": "c1", "content": "ok",
                                                       "append_id": "t1"})
        assert (again.seq, again.duplicate) == (4, True)
        assert restored.create_snapshot(s.session_id, "new").snapshot_id == 4  # identity moved past restored ids
        assert restored.search_messages("brief").matches  # restored messages are searchable
    finally:
        restored.db.close()

    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo)]) == 1
    assert "already holds sessions" in capsys.readouterr().err
    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo), "--force"]) == 0
    assert main(["--dsn", second_db, "restore", "--from-archive", str(tmp_path / "nowhere")]) == 1


def test_stalled_job_returns_to_the_queue_when_its_lease_runs_out(service: Service, settings) -> None:
    from mcp_memory.store.archive_store import LeaderLock
    from mcp_memory.store.db import Database

    s = service.create_session("proj")
    stalled = service.create_snapshot(s.session_id, "stalled")
    alive = service.create_snapshot(s.session_id, "alive")
    with psycopg.connect(settings.dsn) as conn:
        conn.execute("UPDATE export_jobs SET status = 'running', locked_by = 'dead-host:1', "
                     "lease_until = now() + CASE WHEN snapshot_id = %s THEN interval '-1 s' ELSE interval '1 h' END",
                     (stalled.snapshot_id,))
    db = Database(settings)
    lock = LeaderLock(db, "me:2")
    try:
        assert lock.try_acquire()
        claimed = lock.store().claim(worker="me:2", lease=30, limit=10)
        assert [job.snapshot_id for job in claimed] == [stalled.snapshot_id]
        assert lock.store().heartbeat(worker="me:2", lease=30) == 1
    finally:
        lock.release()
        db.close()
    assert job_states(settings.dsn)[alive.snapshot_id][0] == "running"


def test_a_connection_without_the_archiver_lock_claims_nothing(service: Service, settings) -> None:
    """The queue functions check the lock on the calling connection itself: a standby (or anyone)
    cannot claim, renew or finish a job, even with the owner's rights."""
    from mcp_memory.store.archive_store import LeaderLock
    from mcp_memory.store.db import Database

    s = service.create_session("proj")
    snap = service.create_snapshot(s.session_id, "queued")
    db = Database(settings)
    active, standby = LeaderLock(db, "a:1"), LeaderLock(db, "b:1")
    try:
        assert active.try_acquire()
        assert not standby.try_acquire()
        assert not standby.held()  # its open connection is not the lock
        with pytest.raises(Unavailable):
            standby.store()
        for statement in ("SELECT * FROM mm_archive_claim('x:1', 30, 10, NULL)",
                          "SELECT mm_archive_heartbeat('x:1', 30)", "SELECT mm_archive_release_running()",
                          f"SELECT mm_archive_mark_done(ARRAY[{snap.snapshot_id}]::bigint[])"):
            with psycopg.connect(settings.dsn, autocommit=True) as conn, pytest.raises(psycopg.Error) as raised:
                conn.execute(statement)
            assert "does not hold the archiver lease" in str(raised.value)
        assert job_states(settings.dsn)[snap.snapshot_id][0] == "pending"
        assert [j.snapshot_id for j in active.store().claim(worker="a:1", lease=30, limit=10)] == [snap.snapshot_id]
    finally:
        active.release()
        standby.release()
        db.close()
