"""Git as plain functions over a repository path (the git CLI, no state kept between calls).

Every function touches only the files it is given: `git add <file>` of the touched files, never a
scan of the tree, and the watermark is read from a file's tail. That keeps the cost of an export
proportional to the lines it adds, not to the size of the archive.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..errors import Invalid, Unavailable
from . import layout

log = logging.getLogger(__name__)

REMOTE = "origin"
_TAIL_BLOCK = 64 * 1024
_ENV = {
    "GIT_TERMINAL_PROMPT": "0",  # a daemon must fail, not wait for a password
    "GIT_AUTHOR_NAME": "mcp-memory archiver",
    "GIT_AUTHOR_EMAIL": "archiver@mcp-memory.invalid",
    "GIT_COMMITTER_NAME": "mcp-memory archiver",
    "GIT_COMMITTER_EMAIL": "archiver@mcp-memory.invalid",
    "LC_ALL": "C",
}


class GitError(Unavailable):
    """A git command failed; `rejected` when the remote refused a push (it moved on without us)."""

    def __init__(self, message: str, *, rejected: bool = False) -> None:
        super().__init__(message)
        self.rejected = rejected


def git(repo: Path, *args: str, input: str | bytes | None = None, env: dict[str, str] | None = None,
        timeout: float | None = None, check: bool = True) -> str:
    """Run one git command in `repo`; its stdout, or GitError with git's own message."""
    text = not isinstance(input, bytes)
    try:
        done = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True, text=text,
                              env={**os.environ, **_ENV, **(env or {})}, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} did not finish within {timeout:.0f}s") from None
    except FileNotFoundError:
        raise GitError("the git executable was not found on PATH") from None
    out = done.stdout if text else done.stdout.decode()
    if check and done.returncode != 0:
        err = done.stderr if text else done.stderr.decode()
        message = " ".join(err.split()) or f"exit {done.returncode}"
        raise GitError(f"git {args[0]}: {message}", rejected="rejected" in (err + out))
    return out


def init(repo: Path, remote: str | None = None) -> bool:
    """Create and initialise the archive repository if missing (branch main, README.md); point
    `origin` at `remote`. Returns True when the repository was created."""
    repo.mkdir(parents=True, exist_ok=True)
    created = not (repo / ".git").exists()
    if created:
        git(repo, "init", "-q", "-b", layout.BRANCH)
        git(repo, "config", "gc.autoDetach", "false")
    if remote:
        urls = git(repo, "remote", check=False).split()
        git(repo, "remote", "set-url" if REMOTE in urls else "add", REMOTE, remote)
    if head(repo) is None and sync_with_remote(repo, remote) != "reset":
        (repo / layout.SESSIONS_DIR).mkdir(exist_ok=True)
        (repo / "README.md").write_text(layout.README, encoding="utf-8")
        git(repo, "add", "--", "README.md")
        git(repo, "commit", "-q", "--no-verify", "-m", "archive: initialise (README.md)")
    return created


def head(repo: Path) -> str | None:
    out = git(repo, "rev-parse", "-q", "--verify", f"refs/heads/{layout.BRANCH}^{{commit}}", check=False)
    return out.strip() or None


def session_watermark(repo: Path, session_id: str) -> int:
    """The last seq in sessions/<id>.jsonl, read from the file's tail (0 when absent). A torn last line
    (a crash in the middle of a write) is cut off here, so that it is rewritten, never duplicated."""
    path = repo / layout.session_path(session_id)
    if not path.exists():
        return 0
    with path.open("r+b") as f:
        size = f.seek(0, os.SEEK_END)
        if size and _byte_at(f, size - 1) != b"\n":
            size = _rfind_newline(f, size) + 1
            f.truncate(size)
            log.warning("repaired a torn last line in %s (cut at byte %d)", path, size)
        if size == 0:
            return 0
        start = _rfind_newline(f, size - 1) + 1
        f.seek(start)
        last = f.read(size - start)
    try:
        return int(json.loads(last)["seq"])
    except (ValueError, KeyError, TypeError) as exc:
        raise Invalid(f"{path}: the last line is not an archive line ({exc}); the file was edited") from None


def _byte_at(f, offset: int) -> bytes:
    f.seek(offset)
    return f.read(1)


def _rfind_newline(f, end: int) -> int:
    """Offset of the last b'\\n' before `end`, or -1: reads backwards in blocks, never the whole file."""
    while end > 0:
        start = max(0, end - _TAIL_BLOCK)
        f.seek(start)
        found = f.read(end - start).rfind(b"\n")
        if found >= 0:
            return start + found
        end = start
    return -1


def append_session_lines(repo: Path, session_id: str, chunks: Iterable[str], *,
                         midway: Callable[[], None] | None = None) -> None:
    """Append whole lines (given in chunks) to sessions/<id>.jsonl, then fsync. `midway` runs after half
    of the first chunk is on disk: the daemon's crash-test checkpoint, a no-op in production."""
    path = repo / layout.session_path(session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as f:
        for data in (chunk.encode() for chunk in chunks if chunk):
            if midway is not None:
                f.write(data[: len(data) // 2])
                f.flush()
                midway()
                data, midway = data[len(data) // 2:], None
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_if_changed(repo: Path, relpath: str, text: str) -> bool:
    path = repo / relpath
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def commit(repo: Path, paths: list[str], message: str, *, date: str | None = None) -> str:
    """`git add` of exactly these paths, then one commit (even when nothing changed). Returns its sha."""
    if paths:
        git(repo, "add", "--", *paths)
    env = {"GIT_AUTHOR_DATE": date} if date else None
    git(repo, "commit", "-q", "--allow-empty", "--no-verify", "--cleanup=verbatim", "-F", "-",
        input=message, env=env)
    return head(repo) or ""


def find_recent_commit(repo: Path, subject: str, *, depth: int = 20) -> str | None:
    """The sha of a commit with this subject among the last `depth` on main (a crash after the commit
    and before the tag leaves it there; looking further back is never needed: one writer, in order)."""
    if head(repo) is None:
        return None
    out = git(repo, "log", f"-n{depth}", "--format=%H %s", layout.BRANCH)
    for line in out.splitlines():
        sha, _, found = line.partition(" ")
        if found == subject:
            return sha
    return None


def tag_exists(repo: Path, name: str) -> bool:
    return bool(git(repo, "rev-parse", "-q", "--verify", f"refs/tags/{name}", check=False).strip())


def tag(repo: Path, name: str, rev: str, message: str) -> None:
    """Annotated tag; a no-op when it already exists (a retry after a crash)."""
    if not tag_exists(repo, name):
        git(repo, "tag", "-a", name, rev, "-F", "-", input=message)


def push(repo: Path, *, timeout: float) -> None:
    """Push main and the annotated tags it reaches. Raises GitError (rejected=True when the remote
    has commits we do not: another writer was active)."""
    git(repo, "push", "-q", "--porcelain", "--follow-tags", REMOTE, f"{layout.BRANCH}:{layout.BRANCH}",
        timeout=timeout)


def has_remote(repo: Path) -> bool:
    return REMOTE in git(repo, "remote", check=False).split()


def unpushed(repo: Path) -> bool:
    """True when main has commits that origin/main (as last fetched or pushed) lacks."""
    local = head(repo)
    remote = _remote_head(repo)
    return local is not None and local != remote and not (remote and _is_ancestor(repo, local, remote))


def sync_with_remote(repo: Path, remote: str | None, *, timeout: float = 60) -> str:
    """Bring main up to date with the remote when taking over as writer. The remote wins when the two
    diverged (another archiver wrote while we were away): our unpushed commits are dropped with their
    tags — their jobs were never marked done, so they are exported again. Returns what was done."""
    if not remote:
        return "no-remote"
    try:
        git(repo, "fetch", "-q", REMOTE, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*",
            timeout=timeout)
    except GitError as exc:
        log.warning("cannot fetch from the archive remote, continuing with the local copy: %s", exc)
        return "offline"
    local, theirs = head(repo), _remote_head(repo)
    if theirs is None or local == theirs:
        return "up-to-date"
    if local is not None and _is_ancestor(repo, theirs, local):
        return "ahead"
    git(repo, "reset", "-q", "--hard", theirs)
    git(repo, "clean", "-q", "-f", "--", layout.SESSIONS_DIR)
    stale = git(repo, "tag", "--no-merged", layout.BRANCH, "--list", "snapshot-*").split()
    if stale:
        git(repo, "tag", "-d", *stale)
    return "reset"


def _remote_head(repo: Path) -> str | None:
    out = git(repo, "rev-parse", "-q", "--verify", f"refs/remotes/{REMOTE}/{layout.BRANCH}^{{commit}}", check=False)
    return out.strip() or None


def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    done = subprocess.run(["git", "merge-base", "--is-ancestor", older, newer], cwd=repo, capture_output=True,
                          check=False)
    return done.returncode == 0


# reading (verify, restore) -----------------------------------------------------------------------
def list_files(repo: Path, *, rev: str = layout.BRANCH) -> list[str]:
    out = git(repo, "ls-tree", "-r", "--name-only", rev, "--", layout.SESSIONS_DIR)
    return out.splitlines()


def read_files(repo: Path, paths: list[str], *, rev: str = layout.BRANCH) -> Iterator[tuple[str, bytes]]:
    """The committed content of each path at `rev`, streamed by one `git cat-file --batch`."""
    proc = subprocess.Popen(["git", "cat-file", "--batch"], cwd=repo, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, **_ENV})
    try:
        for path in paths:
            proc.stdin.write(f"{rev}:{path}\n".encode())
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) < 3:
                raise GitError(f"git cat-file: {path} is missing at {rev}")
            data = proc.stdout.read(int(header[2]))
            proc.stdout.read(1)  # the newline after each object
            yield path, data
    finally:
        proc.stdin.close()
        proc.wait()


def commit_messages(repo: Path) -> list[str]:
    """Full messages of every commit on main, oldest first (one `git log`)."""
    if head(repo) is None:
        return []
    out = git(repo, "log", "--reverse", "--format=%B%x00", layout.BRANCH)
    return [m.strip("\n") for m in out.split("\x00") if m.strip()]


def tags(repo: Path) -> dict[str, str]:
    """snapshot-* tag name → the commit it points at."""
    out = git(repo, "for-each-ref", "--format=%(refname:short) %(*objectname)", "refs/tags/snapshot-*")
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def tag_message(repo: Path, name: str) -> str:
    return git(repo, "cat-file", "-p", f"refs/tags/{name}").split("\n\n", 1)[-1]
