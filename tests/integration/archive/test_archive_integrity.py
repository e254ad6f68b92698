"""The archive as an operator meets it after faults: rows changed behind the write functions are not
archived, restore lists bad lines and restores the rest, stale git locks and uncommitted lines left
by a killed archiver heal by themselves, tags hold exactly their snapshot, and a standby archiver
writes nothing until the active one dies."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from archive_support import archive_lines, cli, git, job_states, messages, second_db  # noqa: F401  (fixtures)
from test_archive_daemon import all_done, archiver_env, holder_name, spawn, wait_until  # noqa: F401

from mcp_memory.archive import layout
from mcp_memory.cli import main
from mcp_memory.core.service import Service


def test_a_row_that_does_not_hash_to_its_payload_is_not_archived(service: Service, cli, settings,  # noqa: F811
                                                                  tmp_path: Path, capsys) -> None:
    s = service.create_session("proj")
    service.append_messages(s.session_id, messages(3))
    with psycopg.connect(settings.dsn) as conn:  # the owner changes a stored payload behind the functions
        conn.execute("UPDATE messages SET payload = jsonb_set(payload, '{content}', '\"forged\"') "
                     "WHERE session_id = %s AND seq = 2", (s.session_id,))
    snap = service.create_snapshot(s.session_id, "after the forgery")
    repo = tmp_path / "archive"
    capsys.readouterr()
    assert cli("archive", "--once", "--repo", str(repo)) == 1  # its only job failed: cron must see it
    assert "mcp-memory archive: 1 job(s) failed, 0 left to retry" in capsys.readouterr().err
    status, attempts, error = job_states(settings.dsn)[snap.snapshot_id]
    assert status == "failed" and attempts == 1  # retrying cannot make it right
    assert f"session {s.session_id} seq 2" in error and "payload_hash" in error
    assert archive_lines(repo, s.session_id) == []  # nothing of the session reached the archive
    assert "snapshot-" not in git(repo, "tag")


def test_restore_lists_a_tampered_line_and_restores_everything_else(service: Service, cli, tmp_path: Path,  # noqa: F811
                                                                     second_db: str, capsys) -> None:  # noqa: F811
    good = service.create_session("proj")
    service.append_messages(good.session_id, messages(3, "g"))
    service.create_snapshot(good.session_id, "good")
    bad = service.create_session("proj")
    service.append_messages(bad.session_id, messages(5, "b"))
    service.create_snapshot(bad.session_id, "bad")
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    path = repo / layout.session_path(bad.session_id)
    path.write_text(path.read_text().replace("b 2 héllo", "b 2 tampered"))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "tamper")
    capsys.readouterr()

    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["sessions"] == 2 and report["messages"] == 3 + 2
    (line,) = report["bad_lines"]
    assert line["file"] == layout.session_path(bad.session_id) and line["line"] == 3
    assert "payload_sha256" in line["why"] and "up to seq 2" in line["why"] and "2 later line(s)" in line["why"]
    with psycopg.connect(second_db) as conn:
        seqs = dict(conn.execute("SELECT session_id, array_agg(seq ORDER BY seq) FROM messages GROUP BY 1").fetchall())
        snaps = conn.execute("SELECT session_id FROM snapshots").fetchall()
        last = dict(conn.execute("SELECT session_id, last_seq FROM sessions").fetchall())
    assert seqs == {good.session_id: [1, 2, 3], bad.session_id: [1, 2]}
    assert snaps == [(good.session_id,)]  # the bad session's snapshot (seq 5) is beyond what was restored
    assert last[bad.session_id] == 2  # the next append gets seq 3: no gap
    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo), "--force"]) == 1
    assert f"bad line: {layout.session_path(bad.session_id)}:3:" in capsys.readouterr().err


def test_a_crafted_meta_is_listed_and_the_rest_restored(service: Service, cli, tmp_path: Path,  # noqa: F811
                                                        second_db: str, capsys) -> None:  # noqa: F811
    s = service.create_session("proj")
    service.append_messages(s.session_id, messages(2))
    service.create_snapshot(s.session_id, "one")
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    forged = "ses_00000000-0000-0000-0000-000000000001"
    (repo / layout.meta_path(forged)).write_text(json.dumps({"session_id": forged, "project_id": "",
                                                             "created_at": "not a time"}))
    (repo / "sessions" / "ses_wrong.meta.json").write_text(json.dumps({"session_id": s.session_id}))
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "crafted")
    capsys.readouterr()
    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["sessions"] == 1 and report["messages"] == 2
    assert sorted(b["file"] for b in report["bad_lines"]) == [layout.meta_path(forged), "sessions/ses_wrong.meta.json"]


def test_stale_git_locks_and_uncommitted_lines_heal_and_tags_hold_their_snapshot(
        service: Service, cli, tmp_path: Path, settings, capsys) -> None:  # noqa: F811
    s = service.create_session("proj")
    service.append_messages(s.session_id, messages(2))
    first = service.create_snapshot(s.session_id, "one")
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    # what a writer killed with its git child leaves: a lock, and lines written but never committed
    (repo / ".git" / "index.lock").write_text("")
    (repo / ".git" / "refs" / "heads" / "main.lock").write_text("")
    with (repo / layout.session_path(s.session_id)).open("a") as f:
        f.write(json.dumps({"seq": 3, "session_id": s.session_id, "role": "user", "content": "never stored"}) + "\n")
    service.append_messages(s.session_id, messages(1, "n"))
    snap = service.create_snapshot(s.session_id, "two")
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    assert job_states(settings.dsn)[snap.snapshot_id][0] == "done"
    assert not (repo / ".git" / "index.lock").exists()
    tree = git(repo, "show", f"snapshot-{snap.snapshot_id}:{layout.session_path(s.session_id)}")
    assert [json.loads(x)["seq"] for x in tree.splitlines()] == [1, 2, 3]
    assert "never stored" not in tree
    capsys.readouterr()
    assert cli("archive", "verify", "--repo", str(repo)) == 0

    # a tag moved onto a tree with more lines than its snapshot is reported
    name = layout.tag_name(first.snapshot_id)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "tag", "-f", "-a",
        "-m", layout.subject(first.snapshot_id, s.session_id, 2), name, "main")
    assert cli("archive", "verify", "--repo", str(repo)) == 1
    assert f"tag {name}: its tree holds lines up to seq 3, beyond the snapshot's seq 2" in capsys.readouterr().out


def test_a_missing_repository_folder_is_named(service: Service, tmp_path: Path) -> None:
    from mcp_memory.archive import gitrepo

    with pytest.raises(gitrepo.GitError, match=r"archive repository folder .*gone.* does not exist"):
        gitrepo.head(tmp_path / "gone")


def test_kill_9_of_the_archiver_process_group_at_random_points_converges(service: Service, settings, profile,
                                                                        archiver_env, tmp_path: Path, cli,  # noqa: F811
                                                                        capsys) -> None:
    """20 rounds: the daemon (and any git child) is SIGKILLed as a process group at a random moment
    while snapshots keep coming; a final run converges with no manual step and verify passes."""
    rng = random.Random(20)
    repo = tmp_path / "archive"
    sessions = [service.create_session("proj") for _ in range(3)]
    for round_ in range(20):
        for s in sessions:
            service.append_messages(s.session_id, messages(rng.randint(1, 30), f"r{round_}"))
            service.create_snapshot(s.session_id, f"round {round_}")
        proc = subprocess.Popen([sys.executable, "-m", "mcp_memory", "--dsn", settings.dsn, "archive", "--daemon",
                                 "--repo", str(repo)], env=archiver_env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(rng.uniform(0.3, 1.5))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    states = job_states(settings.dsn)
    assert all(state == "done" for state, _, _ in states.values()), states
    capsys.readouterr()
    assert cli("archive", "verify", "--repo", str(repo)) == 0, capsys.readouterr().out


def test_standby_writes_nothing_and_takes_over_within_10s(service: Service, settings, spawn, tmp_path: Path,  # noqa: F811
                                                           capsys) -> None:
    first = spawn("--daemon", "--repo", str(tmp_path / "host-a"))
    wait_until(lambda: holder_name(settings).endswith(f":{first.pid}") or None)
    second = spawn("--daemon", "--repo", str(tmp_path / "host-b"))
    s = service.create_session("proj")
    for i in range(5):
        service.append_messages(s.session_id, messages(2, f"a{i}"))
        service.create_snapshot(s.session_id, f"by a {i}")
    wait_until(lambda: all_done(settings.dsn))
    time.sleep(1.0)  # several standby intervals (0.3 s)
    assert not (tmp_path / "host-b").exists()  # the standby did not even create its repository
    assert holder_name(settings).endswith(f":{first.pid}")
    locked = {row[0] for row in job_states(settings.dsn).values()}
    assert locked == {"done"}

    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    killed_at = time.monotonic()
    wait_until(lambda: holder_name(settings).endswith(f":{second.pid}") or None, timeout=10)
    takeover = time.monotonic() - killed_at
    service.create_snapshot(s.session_id, "by b")
    wait_until(lambda: all_done(settings.dsn), timeout=10)
    assert takeover < 10
    print(f"takeover after kill -9: {takeover:.2f}s")
    assert (tmp_path / "host-b" / layout.session_path(s.session_id)).exists()
