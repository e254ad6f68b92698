"""The archiver heals every crash by itself: 20 rounds of kill -9 of the daemon's whole process group
(with its git children) at random moments *while it exports*, snapshots arriving all along; every
restarted daemon goes on from what the dead one left (stale git locks, lines never committed), the
last one drains the queue with no manual step, and every tag's tree holds exactly its snapshot's
lines (`archive verify`, which compares each tag with the snapshot's up_to_seq)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from archive_support import cli, git, job_states, messages  # noqa: F401  (fixtures)
from test_archive_daemon import all_done, archiver_env, wait_until  # noqa: F401

from mcp_memory.core.service import Service

ROUNDS = 20


def _done(dsn: str) -> int:
    return sum(1 for state, _, _ in job_states(dsn).values() if state == "done")


def _leftovers(repo: Path) -> tuple[bool, bool]:
    """(a git lock was left, the working tree holds uncommitted changes)"""
    git_dir = repo / ".git"
    locks = git_dir.is_dir() and any(p.name.endswith(".lock") for p in git_dir.rglob("*.lock"))
    dirty = git_dir.is_dir() and bool(subprocess.run(["git", "status", "--porcelain"], cwd=repo, check=False, capture_output=True,
                                                     text=True).stdout.strip())
    return locks, dirty


def _poll(condition, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.002)


def _git_child(proc: subprocess.Popen) -> bool:
    try:
        return any(child.name() == "git" for child in psutil.Process(proc.pid).children(recursive=True))
    except psutil.Error:
        return False


def _daemon(settings, env: dict[str, str], repo: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mcp_memory", "--dsn", settings.dsn, "archive", "--daemon",
                             "--repo", str(repo)], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_kill_9_while_exporting_heals_without_a_manual_step(service: Service, settings, archiver_env,  # noqa: F811
                                                            tmp_path: Path, cli, capsys) -> None:  # noqa: F811
    rng = random.Random(19)
    repo = tmp_path / "archive"
    sessions = [service.create_session("proj") for _ in range(3)]
    locks_left = dirty_left = 0
    for round_ in range(ROUNDS):
        for s in sessions:
            service.append_messages(s.session_id, messages(rng.randint(1, 12), f"r{round_}"))
            service.create_snapshot(s.session_id, f"round {round_}")
        before = _done(settings.dsn)
        proc = _daemon(settings, archiver_env, repo)
        try:
            if round_ % 2:
                # kill in the middle of a git command (its git child dies with the group)
                _poll(lambda p=proc: _git_child(p), timeout=20)
                time.sleep(rng.uniform(0.0, 0.02))
            else:
                # a daemon that could not heal what the last kill left would never get here; kill
                # it while it goes on with the batch
                wait_until(lambda b=before: _done(settings.dsn) > b, timeout=20)
                time.sleep(rng.uniform(0.0, 0.2))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        lock, dirty = _leftovers(repo)
        locks_left += lock
        dirty_left += dirty
    # the next daemon (no manual step) drains everything the killed ones left
    proc = _daemon(settings, archiver_env, repo)
    try:
        wait_until(lambda: all_done(settings.dsn), timeout=30)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    states = job_states(settings.dsn)
    assert all(state == "done" for state, _, _ in states.values()), states
    capsys.readouterr()
    assert cli("archive", "verify", "--repo", str(repo)) == 0, capsys.readouterr().out
    tags = [t for t in git(repo, "tag").split() if t.startswith("snapshot-")]
    assert len(tags) == len(states) == ROUNDS * len(sessions)
    print(f"\n{ROUNDS} kills while exporting: {locks_left} left a git lock, {dirty_left} uncommitted lines; "
          f"each restart progressed, the next daemon converged, {len(tags)} tags verified")
