"""A push is killed only when it makes no progress for push_timeout seconds (with every process it
started), not after a fixed time: a real git remote behind a receive-pack wrapper that is slow but
talks goes through; one that hangs is killed, its children too."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest
from archive_support import bare_remote, git

from mcp_memory.archive import gitrepo

SLOW = "#!/bin/sh\nfor i in 1 2 3 4 5 6; do echo \"slow link $i\" >&2; sleep 0.5; done\nexec git-receive-pack \"$@\"\n"
HANGS = "#!/bin/sh\necho $$ > \"{pidfile}\"\nexec sleep 60\n"


def _repo_with_wrapper(tmp_path: Path, script: str) -> tuple[Path, Path]:
    remote = bare_remote(tmp_path)
    repo = tmp_path / "archive"
    gitrepo.init(repo, str(remote))
    wrapper = tmp_path / "receive-pack"
    wrapper.write_text(script)
    wrapper.chmod(0o755)
    git(repo, "config", "remote.origin.receivepack", str(wrapper))
    return repo, remote


def test_a_slow_push_that_keeps_talking_is_not_killed(tmp_path: Path) -> None:
    repo, remote = _repo_with_wrapper(tmp_path, SLOW)
    ticks: list[float] = []
    started = time.monotonic()
    gitrepo.push(repo, timeout=1.0, tick=lambda: ticks.append(time.monotonic()))
    took = time.monotonic() - started
    assert took > 2 * 1.0  # longer than the timeout: only progress kept it alive
    assert git(remote, "rev-parse", "main") == git(repo, "rev-parse", "main")
    assert len(ticks) >= 2  # the daemon's heartbeat ran meanwhile
    print(f"\nslow push: {took:.1f} s with push_timeout 1 s, {len(ticks)} ticks")


def test_a_hanging_push_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "wrapper.pid"
    repo, _ = _repo_with_wrapper(tmp_path, HANGS.format(pidfile=pidfile))
    started = time.monotonic()
    with pytest.raises(gitrepo.GitError, match="made no progress for 1s and was killed"):
        gitrepo.push(repo, timeout=1.0)
    took = time.monotonic() - started
    assert took < 60 / 4  # the hanging remote would have held it for 60 s
    pid = int(pidfile.read_text())
    try:  # the remote side it started is killed too (SIGKILL lands at once, the reaping may follow)
        wrapper = psutil.Process(pid)
        _, alive = psutil.wait_procs([wrapper], timeout=5)
        assert not alive or wrapper.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        pass
    print(f"\nhanging push killed after {took:.1f} s (push_timeout 1 s)")
