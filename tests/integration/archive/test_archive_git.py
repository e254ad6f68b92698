"""Archive building blocks without a database: the retry strategy, the file/commit formats, and the git
functions on real repositories in tmp_path (with a local bare remote)."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mcp_memory.archive import gitrepo, gittags, layout
from mcp_memory.archive.retry import RetryStrategy
from mcp_memory.core.messages import payload_digest
from mcp_memory.errors import Invalid

SID = "ses_00000000-0000-4000-8000-000000000001"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def bare_remote(tmp_path: Path, name: str = "remote.git") -> Path:
    path = tmp_path / name
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    return path


def line(seq: int, **payload: object) -> str:
    payload = {"schema_version": 1, "role": "user", "content": f"m{seq}", **payload}
    return layout.message_line(session_id=SID, seq=seq, append_id=f"a{seq}", payload=payload,
                               created_at=datetime(2026, 1, 1, tzinfo=UTC), payload_hash=payload_digest(payload))


# retry strategy ---------------------------------------------------------------------------------
def test_retry_delay_grows_exponentially_and_is_capped() -> None:
    strategy = RetryStrategy(max_attempts=5, base=2, factor=3, max_delay=50, jitter=0.5)
    assert [strategy.delay(n, draw=0.0) for n in (1, 2, 3, 4)] == [2, 6, 18, 50]
    assert strategy.delay(40, draw=0.0) == 50


def test_retry_jitter_only_shortens_within_its_fraction() -> None:
    strategy = RetryStrategy(base=10, jitter=0.5)
    assert strategy.delay(1, draw=0.0) == 10
    assert strategy.delay(1, draw=0.999) == pytest.approx(5.005)
    assert all(5 <= strategy.delay(1) <= 10 for _ in range(200))
    assert RetryStrategy(base=10, jitter=0).delay(1) == 10


def test_retry_exhausted_after_max_attempts_and_rejects_nonsense() -> None:
    strategy = RetryStrategy(max_attempts=3)
    assert [strategy.exhausted(n) for n in (1, 2, 3, 4)] == [False, False, True, True]
    with pytest.raises(ValueError):
        RetryStrategy(max_attempts=0)
    with pytest.raises(ValueError):
        strategy.delay(0)
    assert RetryStrategy.from_config({"max_attempts": 2, "retry_base": 0.5}).base == 0.5


# formats ----------------------------------------------------------------------------------------
def test_commit_message_round_trips_verbatim() -> None:
    info = layout.SnapshotInfo(snapshot_id=7, session_id=SID, project_id="p", up_to_seq=3,
                               commit_msg="line 1\n\n# kept, not a comment\n  trailing  ", created_at="2026-01-01T00:00:00Z",
                               created_by="alice", meta={"k": "v"})
    message = layout.commit_message(info)
    assert message.splitlines()[0] == f"snapshot 7: {SID} up to seq 3"
    assert layout.parse_commit_message(message) == info
    assert layout.parse_commit_message("archive: initialise (README.md)") is None


def test_line_keeps_created_at_only_when_the_payload_had_it() -> None:
    with_time = json.loads(line(1, created_at="2026-01-01T00:00:00Z"))
    without = json.loads(line(2))
    assert with_time["created_at"] == without["created_at"] == "2026-01-01T00:00:00Z"
    assert "created_at" in layout.parse_line(line(1, created_at="2026-01-01T00:00:00Z"), where="x").payload
    assert "created_at" not in layout.parse_line(line(2), where="x").payload


def test_edited_line_is_detected() -> None:
    edited = line(1).replace('"m1"', '"forged"')
    with pytest.raises(Invalid, match="x:1: content does not match"):
        layout.parse_line(edited, where="x:1")


# git functions ----------------------------------------------------------------------------------
def test_init_creates_repository_with_readme_and_is_idempotent(tmp_path: Path) -> None:
    repo = tmp_path / "archive"
    assert gitrepo.init(repo) is True
    assert (repo / "README.md").read_text().startswith("# mcp-memory archive")
    assert git(repo, "branch", "--show-current").strip() == "main"
    assert gitrepo.init(repo) is False
    assert git(repo, "rev-list", "--count", "main").strip() == "1"


def test_watermark_reads_the_tail_and_repairs_a_torn_line(tmp_path: Path) -> None:
    repo = tmp_path / "archive"
    gitrepo.init(repo)
    assert gitrepo.session_watermark(repo, SID) == 0
    gitrepo.append_session_lines(repo, SID, [line(1) + line(2), line(3)])
    assert gitrepo.session_watermark(repo, SID) == 3
    path = repo / layout.session_path(SID)
    with path.open("a") as f:
        f.write(line(4)[:25])  # a crash in the middle of a write
    assert gitrepo.session_watermark(repo, SID) == 3
    assert path.read_text() == line(1) + line(2) + line(3)


def test_watermark_of_a_long_last_line_spanning_blocks(tmp_path: Path) -> None:
    repo = tmp_path / "archive"
    gitrepo.init(repo)
    gitrepo.append_session_lines(repo, SID, [line(1), line(2, content="x" * 200_000)])
    assert gitrepo.session_watermark(repo, SID) == 2


def test_commit_tag_push_and_idempotent_tag(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path)
    repo = tmp_path / "archive"
    gitrepo.init(repo, str(remote))
    gitrepo.append_session_lines(repo, SID, [line(1)])
    sha = gitrepo.commit(repo, [layout.session_path(SID)], "snapshot 1: x up to seq 1\n", date="@1700000000 +0000")
    gittags.tag(repo, "snapshot-1", sha, "snapshot 1\n")
    gittags.tag(repo, "snapshot-1", sha, "snapshot 1\n")  # a retry after a crash
    empty = gitrepo.commit(repo, [], "snapshot 2: x up to seq 1\n")  # a snapshot that adds no line
    assert empty != sha
    assert gittags.find_recent_commit(repo, "snapshot 1: x up to seq 1") == sha
    gitrepo.push(repo, timeout=30)
    assert git(remote, "tag").split() == ["snapshot-1"]
    assert git(remote, "rev-parse", "main").strip() == empty
    assert git(remote, "log", "-1", "--format=%at", "snapshot-1").strip() == "1700000000"


def test_push_to_a_missing_remote_raises_and_commits_continue(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path)
    repo = tmp_path / "archive"
    gitrepo.init(repo, str(remote))
    remote.rename(tmp_path / "moved.git")
    gitrepo.commit(repo, [], "snapshot 1: x up to seq 0\n")
    with pytest.raises(gitrepo.GitError):
        gitrepo.push(repo, timeout=30)
    gitrepo.commit(repo, [], "snapshot 2: x up to seq 0\n")
    (tmp_path / "moved.git").rename(remote)
    gitrepo.push(repo, timeout=30)
    assert git(remote, "rev-list", "--count", "main").strip() == "3"


def test_sync_takes_the_remote_when_histories_diverged(tmp_path: Path) -> None:
    """A former writer that comes back drops its unpushed commits and their tags (never marked done)."""
    remote = bare_remote(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    gitrepo.init(a, str(remote))
    gitrepo.push(a, timeout=30)
    gitrepo.init(b, str(remote))
    assert git(b, "rev-parse", "main") == git(a, "rev-parse", "main")
    gittags.tag(a, "snapshot-9", gitrepo.commit(a, [], "snapshot 9: x up to seq 0\n"), "unpushed\n")
    gittags.tag(b, "snapshot-10", gitrepo.commit(b, [], "snapshot 10: x up to seq 0\n"), "pushed\n")
    gitrepo.push(b, timeout=30)
    assert gitrepo.sync_with_remote(a, str(remote)) == "reset"
    assert git(a, "rev-parse", "main") == git(b, "rev-parse", "main")
    assert git(a, "tag").split() == ["snapshot-10"]
    assert gitrepo.sync_with_remote(a, str(remote)) == "up-to-date"
    gitrepo.commit(a, [], "snapshot 11: x up to seq 0\n")
    assert gitrepo.sync_with_remote(a, str(remote)) == "ahead"
