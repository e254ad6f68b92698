"""The archiver as a process: NOTIFY wake-up, clean shutdown on SIGTERM, failover between two daemons,
and kill -9 at each crash point (the hidden `--crash-at` flag makes the archiver SIGKILL itself there)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from archive_support import archive_lines, bare_remote, db_rows, git, job_states, messages

from mcp_memory.archive import layout, queue
from mcp_memory.archive.export import CRASH_POINTS
from mcp_memory.core.service import Service
from mcp_memory.store.db import Database


@pytest.fixture
def archiver_env(profile: dict[str, str], tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "archiver.toml"
    config.write_text("[archive]\npoll_interval = 60.0\nstandby_interval = 0.3\nlock_wait = 5.0\n"
                      "retry_base = 0.2\n")
    return {**profile, "MCP_MEMORY_CONFIG": str(config)}


@pytest.fixture
def spawn(settings, archiver_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen]]:
    """Start `mcp-memory archive …` processes; every one is killed at the end of the test."""
    started: list[subprocess.Popen] = []

    def start(*args: str, log: str = "archiver") -> subprocess.Popen:
        with (tmp_path / f"{log}-{len(started)}.log").open("w") as stderr:  # the child holds its own copy
            proc = subprocess.Popen([sys.executable, "-m", "mcp_memory", "--dsn", settings.dsn, "archive", *args],
                                    env=archiver_env, stdout=subprocess.DEVNULL, stderr=stderr)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def wait_until(condition: Callable[[], object], timeout: float = 15.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.1)
    raise AssertionError(f"condition not met within {timeout}s")


def holder_pid(settings) -> int | None:
    db = Database(settings)
    try:
        state = queue.status(db)
    finally:
        db.close()
    return state.holder["pid"] if state.holder else None


def holder_name(settings) -> str:
    db = Database(settings)
    try:
        state = queue.status(db)
    finally:
        db.close()
    return (state.holder or {}).get("worker") or ""


def all_done(dsn: str) -> bool:
    states = job_states(dsn)
    return bool(states) and all(state == "done" for state, _, _ in states.values())


def test_daemon_wakes_on_notify_and_stops_cleanly_on_sigterm(service: Service, settings, spawn, tmp_path) -> None:
    repo = tmp_path / "archive"
    daemon = spawn("--daemon", "--repo", str(repo))
    wait_until(lambda: holder_pid(settings))
    s = service.create_session("proj")
    service.append_messages(s.session_id, messages(3))
    service.create_snapshot(s.session_id, "wake up")
    wait_until(lambda: all_done(settings.dsn), timeout=10)  # poll_interval is 60s: only NOTIFY is this fast
    assert len(archive_lines(repo, s.session_id)) == 3
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=10) == 0
    assert holder_pid(settings) is None


def test_standby_takes_over_when_the_active_archiver_dies(service: Service, settings, spawn, tmp_path) -> None:
    remote = bare_remote(tmp_path)
    first = spawn("--daemon", "--repo", str(tmp_path / "host-a"), "--remote", str(remote))
    wait_until(lambda: holder_name(settings).endswith(f":{first.pid}") or None)
    second = spawn("--daemon", "--repo", str(tmp_path / "host-b"), "--remote", str(remote))
    s = service.create_session("proj")
    service.append_messages(s.session_id, messages(2))
    service.create_snapshot(s.session_id, "by a")
    wait_until(lambda: all_done(settings.dsn))
    assert holder_name(settings).endswith(f":{first.pid}")  # the second one waits as a standby
    assert second.poll() is None

    first.kill()
    first.wait(timeout=10)
    killed_at = time.monotonic()
    service.append_messages(s.session_id, messages(2, "b"))
    service.create_snapshot(s.session_id, "by b")
    wait_until(lambda: all_done(settings.dsn), timeout=15)
    assert time.monotonic() - killed_at < 10
    assert holder_name(settings).endswith(f":{second.pid}")
    assert sorted(git(remote, "tag").split()) == ["snapshot-1", "snapshot-2"]
    assert [x["seq"] for x in archive_lines(tmp_path / "host-b", s.session_id)] == [1, 2, 3, 4]
    assert git(remote, "rev-parse", "main") == git(tmp_path / "host-b", "rev-parse", "main")
    second.send_signal(signal.SIGINT)
    assert second.wait(timeout=10) == 0


def test_kill_9_at_every_crash_point_converges(service: Service, settings, spawn, tmp_path) -> None:
    remote = bare_remote(tmp_path)
    repo = tmp_path / "archive"
    s = service.create_session("proj")
    fork_parent = None
    for round_, point in enumerate(CRASH_POINTS):
        service.append_messages(s.session_id, messages(40, f"r{round_}"))  # enough bytes to tear a line
        snap = service.create_snapshot(s.session_id, f"round {round_}")
        if fork_parent is None:
            fork_parent = service.load_snapshot(snap.snapshot_id)
            service.append_messages(fork_parent.session_id, messages(2, "fork"))
            service.create_snapshot(fork_parent.session_id, "fork")
        crashed = spawn("--once", "--crash-at", point, "--repo", str(repo), "--remote", str(remote), log=point)
        assert crashed.wait(timeout=30) == -signal.SIGKILL, point
        assert job_states(settings.dsn)[snap.snapshot_id][0] == "running"  # stalled, lease still held
        recovered = spawn("--once", "--repo", str(repo), "--remote", str(remote))
        assert recovered.wait(timeout=30) == 0, point
        assert all_done(settings.dsn), point
        check_converged(settings.dsn, repo, [s.session_id, fork_parent.session_id])

    snapshots = [r[0] for r in db_rows(settings.dsn, "SELECT snapshot_id FROM snapshots")]
    subjects = Counter(line.split(":")[0] for line in git(repo, "log", "--format=%s").splitlines())
    assert all(subjects[f"snapshot {i}"] == 1 for i in snapshots)  # one commit per snapshot
    assert sorted(git(remote, "tag").split()) == sorted(f"snapshot-{i}" for i in snapshots)
    verify = subprocess.run([sys.executable, "-m", "mcp_memory", "--dsn", settings.dsn, "archive", "verify",
                             "--repo", str(repo)], env={**os.environ, "MCP_MEMORY_HOME": str(tmp_path / "h")},
                            capture_output=True, text=True, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def check_converged(dsn: str, repo: Path, session_ids: list[str]) -> None:
    """jsonl lines == the database's own rows up to the last snapshot; no duplicate, no torn line."""
    for sid in session_ids:
        lines = archive_lines(repo, sid)
        seqs = [x["seq"] for x in lines]
        assert len(seqs) == len(set(seqs)) and seqs == sorted(seqs), sid
        up_to = db_rows(dsn, "SELECT coalesce(max(up_to_seq), 0) FROM snapshots WHERE session_id = %s", sid)[0][0]
        rows = db_rows(dsn, "SELECT seq, append_id, payload FROM messages WHERE session_id = %s AND seq <= %s "
                            "ORDER BY seq", sid, up_to)
        assert [(x["seq"], x["append_id"], x["content"]) for x in lines] == \
            [(seq, append_id, payload["content"]) for seq, append_id, payload in rows], sid
        assert (repo / layout.session_path(sid)).read_bytes().endswith(b"\n")
        assert not git(repo, "status", "--porcelain", "--", layout.session_path(sid)).strip(), sid
    json.loads((repo / layout.meta_path(session_ids[0])).read_text())


def test_kill_9_of_a_push_is_retried_by_the_same_daemon(service: Service, settings, spawn, tmp_path) -> None:
    remote = bare_remote(tmp_path)
    hold = tmp_path / "hold"
    hold.touch()
    wrapper = tmp_path / "receive-pack"
    wrapper.write_text(f"#!/bin/sh\nwhile [ -e {hold} ]; do sleep 0.1; done\nexec git-receive-pack \"$@\"\n")
    wrapper.chmod(0o755)
    repo = tmp_path / "archive"
    daemon = spawn("--daemon", "--repo", str(repo), "--remote", str(remote))
    wait_until(lambda: holder_pid(settings))
    git(repo, "config", "remote.origin.receivepack", str(wrapper))
    s = service.create_session("proj")
    service.append_messages(s.session_id, messages(3))
    service.create_snapshot(s.session_id, "pushed slowly")

    def push_process() -> psutil.Process | None:
        found = [p for p in psutil.Process(daemon.pid).children(recursive=True)
                 if p.name() == "git" and "push" in p.cmdline()]
        return found[0] if found else None

    push = wait_until(push_process, timeout=30)
    assert isinstance(push, psutil.Process)
    push.kill()  # kill -9 of the push only: the daemon lives on
    wait_until(lambda: job_states(settings.dsn)[1][1] >= 1)  # the attempt failed and was counted
    hold.unlink()
    wait_until(lambda: all_done(settings.dsn), timeout=30)  # the same daemon retried it: no restart
    assert daemon.poll() is None and holder_name(settings).endswith(f":{daemon.pid}")
    assert git(remote, "rev-parse", "main") == git(repo, "rev-parse", "main")
    state, attempts, _ = job_states(settings.dsn)[1]
    assert state == "done" and attempts >= 1  # done after the killed attempt
