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
from typing import IO

from ..errors import Invalid, Unavailable
from . import gitwatch, layout
from .worktree import _open_folder, append_lines, open_file, remove_file, write_if_changed

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


class UnsafeArchive(GitError):
    """What the archiver was about to read or write is not the archive's own: a tree from the remote
    holding a symbolic link, a submodule or a file outside the layout, or a link in the working tree.
    Nothing of it is checked out, followed or written; an operator repairs the remote (or the folder)."""


def git(repo: Path, *args: str, input: str | bytes | None = None, env: dict[str, str] | None = None,
        timeout: float | None = None, check: bool = True) -> str:
    """Run one git command in `repo`; its stdout, or GitError with git's own message."""
    text = not isinstance(input, bytes)
    if not repo.is_dir():
        raise GitError(f"the archive repository folder {repo} does not exist (removed or not mounted?)")
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
    # A link in a checked-out tree becomes a plain file holding the link's text, on every run (an
    # existing repository too): the remote's content never points the archiver's writes elsewhere.
    git(repo, "config", "core.symlinks", "false")
    if remote:
        urls = git(repo, "remote", check=False).split()
        git(repo, "remote", "set-url" if REMOTE in urls else "add", REMOTE, remote)
    if head(repo) is None and _adopt_remote(repo, remote) != "reset":
        os.close(_open_folder(repo, layout.SESSIONS_DIR, make_dirs=True))
        write_if_changed(repo, "README.md", layout.README)
        git(repo, "add", "--", "README.md")
        git(repo, "commit", "-q", "--no-verify", "-m", "archive: initialise (README.md)")
    return created


# Lock files git leaves behind when it is killed with its parent (SIGKILL, OOM, a crash). Only the
# active archiver writes to the repository, and it runs git one command at a time and waits for it,
# so while it holds the single-writer lock and runs no git command, any of these is stale.
_STALE_LOCKS = ("index.lock", "HEAD.lock", "packed-refs.lock", "config.lock", "shallow.lock", "ORIG_HEAD.lock")


def heal(repo: Path) -> list[str]:
    """Remove stale git lock files and put the working tree back to the last commit (lines written by
    a run that died before its commit are exported again from the database). Call only as the active
    archiver, between git commands. Returns the lock files removed."""
    gitdir = repo / ".git"
    removed = [gitdir / name for name in _STALE_LOCKS if (gitdir / name).exists()]
    refs = gitdir / "refs"
    if refs.is_dir():
        removed += sorted(refs.rglob("*.lock"))
    for path in removed:
        path.unlink(missing_ok=True)
        log.warning("removed a stale git lock left by a killed writer: %s", path)
    if head(repo) is not None:
        git(repo, "reset", "-q", "--hard", "HEAD")
        git(repo, "clean", "-q", "-f", "--", layout.SESSIONS_DIR)
    return [str(p.relative_to(repo)) for p in removed]


def _adopt_remote(repo: Path, remote: str | None) -> str:
    """sync_with_remote for a repository without commits; a refused remote leaves it empty (logged)."""
    try:
        return sync_with_remote(repo, remote)
    except UnsafeArchive as exc:
        log.error("%s", exc)
        return "refused"


def reset_paths(repo: Path, paths: list[str]) -> None:
    """Put these files back to their committed content (or remove them when they were never
    committed), in the index too: what an earlier, failed export left there is not committed by the
    next one, so a snapshot's tag holds exactly its own lines."""
    tracked = set(git(repo, "ls-tree", "--name-only", "HEAD", "--", *paths).splitlines()) if head(repo) else set()
    if tracked:
        git(repo, "checkout", "-q", "HEAD", "--", *sorted(tracked))
    untracked = [p for p in paths if p not in tracked]
    if untracked:
        git(repo, "rm", "-q", "--cached", "--ignore-unmatch", "--", *untracked)
        for p in untracked:
            remove_file(repo, p)


def head(repo: Path) -> str | None:
    out = git(repo, "rev-parse", "-q", "--verify", f"refs/heads/{layout.BRANCH}^{{commit}}", check=False)
    return out.strip() or None


def session_watermark(repo: Path, session_id: str) -> int:
    """The last seq in sessions/<id>.jsonl, read from the file's tail (0 when absent). A torn last line
    (a crash in the middle of a write) is cut off here, so that it is rewritten, never duplicated."""
    path = repo / layout.session_path(session_id)
    try:
        fd = open_file(repo, layout.session_path(session_id), os.O_RDWR)
    except FileNotFoundError:
        return 0
    with os.fdopen(fd, "r+b") as f:
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
    append_lines(repo, layout.session_path(session_id), chunks, midway=midway)


def commit(repo: Path, paths: list[str], message: str, *, date: str | None = None) -> str:
    """`git add` of exactly these paths, then one commit (even when nothing changed). Returns its sha."""
    if paths:
        git(repo, "add", "--", *paths)
    env = {"GIT_AUTHOR_DATE": date} if date else None
    git(repo, "commit", "-q", "--allow-empty", "--no-verify", "--cleanup=verbatim", "-F", "-",
        input=message, env=env)
    return head(repo) or ""


def push(repo: Path, *, timeout: float, tick: Callable[[], None] | None = None) -> None:
    """Push main and the snapshot tags. Raises GitError (rejected=True when the remote
    has commits we do not: another writer was active). `timeout` is the time without progress
    (git's progress lines, the remote's messages) after which the push is killed, not a bound on the
    whole push: a large push over a slow link goes on as long as it moves. `tick` runs about every
    second meanwhile (the daemon renews its leases there)."""
    # the snapshot tags by name too (atomic with main): a tag on a commit off main (gittags.exact_commit) or
    # moved by verify --repair reaches the remote as well
    watched(repo, "push", "--progress", "--porcelain", "--atomic", REMOTE, f"{layout.BRANCH}:{layout.BRANCH}",
            "+refs/tags/snapshot-*:refs/tags/snapshot-*", idle=timeout, tick=tick)


def watched(repo: Path, *args: str, idle: float, tick: Callable[[], None] | None = None) -> str:
    """Run a git command that reports progress on stderr; kill it with every process it started
    after `idle` seconds without output (gitwatch.py). Its stdout, or GitError."""
    if not repo.is_dir():
        raise GitError(f"the archive repository folder {repo} does not exist (removed or not mounted?)")
    try:
        done = gitwatch.run(["git", *args], cwd=repo, env={**os.environ, **_ENV}, idle=idle, tick=tick)
    except FileNotFoundError:
        raise GitError("the git executable was not found on PATH") from None
    if done.stalled:
        raise GitError(f"git {args[0]} made no progress for {idle:.0f}s and was killed")
    if done.returncode != 0:
        message = " ".join(" ".join(gitwatch.said(done.err)).split()) or f"exit {done.returncode}"
        raise GitError(f"git {args[0]}: {message[-2000:]}", rejected="rejected" in (done.err + done.out))
    return done.out


def point_remote_head(remote: str) -> bool:
    """Make a local bare remote's HEAD name main when the branch it names does not exist (a plain
    `git init --bare` names master), so that a `git clone` of it checks main out. Only for a local
    path or file:// URL: git offers no way to move a remote HEAD over other transports. Returns
    whether HEAD was moved."""
    path = Path(remote.removeprefix("file://")) if remote.startswith(("/", "file://")) else None
    if path is None or not (path / "HEAD").is_file() or not (path / "objects").is_dir():
        return False
    named = git(path, "--git-dir", str(path), "symbolic-ref", "-q", "HEAD", check=False).strip()
    if named == f"refs/heads/{layout.BRANCH}" or (named and git(
            path, "--git-dir", str(path), "rev-parse", "-q", "--verify", named, check=False).strip()):
        return False
    git(path, "--git-dir", str(path), "symbolic-ref", "HEAD", f"refs/heads/{layout.BRANCH}")
    return True


def has_remote(repo: Path) -> bool:
    return REMOTE in git(repo, "remote", check=False).split()


def unpushed(repo: Path) -> bool:
    """True when main has commits that origin/main (as last fetched or pushed) lacks."""
    local = head(repo)
    remote = _remote_head(repo)
    return local is not None and local != remote and not (remote and is_ancestor(repo, local, remote))


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
    if local is not None and is_ancestor(repo, theirs, local):
        return "ahead"
    check_tree(repo, theirs, what=f"the archive remote's {layout.BRANCH}")
    git(repo, "reset", "-q", "--hard", theirs)
    git(repo, "clean", "-q", "-f", "--", layout.SESSIONS_DIR)
    stale = git(repo, "tag", "--no-merged", layout.BRANCH, "--list", "snapshot-*").split()
    if stale:
        git(repo, "tag", "-d", *stale)
    return "reset"


def _remote_head(repo: Path) -> str | None:
    out = git(repo, "rev-parse", "-q", "--verify", f"refs/remotes/{REMOTE}/{layout.BRANCH}^{{commit}}", check=False)
    return out.strip() or None


def is_ancestor(repo: Path, older: str, newer: str) -> bool:
    done = subprocess.run(["git", "merge-base", "--is-ancestor", older, newer], cwd=repo, capture_output=True,
                          check=False)
    return done.returncode == 0


# what a tree holds -------------------------------------------------------------------------------
def tree_entries(repo: Path, rev: str, *paths: str) -> list[tuple[str, str]]:
    """(mode, path) of every file, link and submodule in `rev`'s tree (under `paths`, default all)."""
    out = git(repo, "ls-tree", "-r", "-z", "--full-tree", rev, "--", *paths)
    entries = []
    for record in out.split("\x00"):
        info, tab, path = record.partition("\t")
        if tab:
            entries.append((info.split(" ", 1)[0], path))
    return entries


def refused_entries(repo: Path, rev: str = layout.BRANCH) -> list[tuple[str, str]]:
    """(path, why) of every entry of `rev` that an archive may not hold (layout.refused_entry)."""
    return [(path, why) for mode, path in tree_entries(repo, rev) if (why := layout.refused_entry(mode, path))]


def check_tree(repo: Path, rev: str, *, what: str, verdict: str = "was refused, nothing of it was checked out") -> None:
    """Raise UnsafeArchive naming the offending paths when `rev`'s tree is not purely an archive's."""
    refused = refused_entries(repo, rev)
    if refused:
        sha = git(repo, "rev-parse", "--short=12", rev).strip()
        listed = "; ".join(f"{path}: {why}" for path, why in refused[:5])
        more = f"; and {len(refused) - 5} more" if len(refused) > 5 else ""
        raise UnsafeArchive(f"{what} ({sha}) {verdict}: {listed}{more}")


def inspect(repo: Path) -> list[str]:
    """What makes this repository unsafe to write through: refused entries in main or in the last fetched
    remote main, and links in the working tree where the archiver writes. Empty when all is well."""
    if not (repo / ".git").is_dir():
        return []
    problems = []
    local, theirs = head(repo), _remote_head(repo)
    revs = {local: (f"the local {layout.BRANCH}", "holds what an archive may not (adopted before this check?)")}
    if theirs != local:
        revs[theirs] = (f"the archive remote's {layout.BRANCH} (as last fetched)",
                        "was refused, nothing of it was checked out")
    for rev, (what, verdict) in revs.items():
        if rev is not None:
            try:
                check_tree(repo, rev, what=what, verdict=verdict)
            except UnsafeArchive as exc:
                problems.append(str(exc))
    for name in ("README.md", layout.SESSIONS_DIR):
        if (repo / name).is_symlink():
            problems.append(f"{repo / name} is a symbolic link in the working tree; the archiver refuses to write there")
    sessions = repo / layout.SESSIONS_DIR
    if sessions.is_dir() and not sessions.is_symlink():
        with os.scandir(sessions) as found:
            links = sorted(e.name for e in found if e.is_symlink())
        problems += [f"{sessions / name} is a symbolic link in the working tree; the archiver refuses to write there"
                     for name in links]
    return problems


# reading (verify, restore) -----------------------------------------------------------------------
def list_files(repo: Path, *, rev: str = layout.BRANCH) -> list[str]:
    """The archive files under sessions/, decisions/ and context/ at `rev`: regular files at archive
    paths only (a link, a submodule or a stray file is never read; refused_entries names them)."""
    return [path for mode, path in tree_entries(repo, rev, layout.SESSIONS_DIR, layout.DECISIONS_DIR,
                                                layout.CONTEXT_DIR)
            if layout.refused_entry(mode, path) is None]


def read_files(repo: Path, paths: list[str], *, rev: str = layout.BRANCH) -> Iterator[tuple[str, bytes]]:
    """The committed content of each path at `rev`, streamed by one `git cat-file --batch`."""
    proc, send, answers = _cat_file_batch(repo)
    try:
        for path in paths:
            send.write(f"{rev}:{path}\n".encode())
            send.flush()
            header = answers.readline().split()
            if len(header) < 3:
                raise GitError(f"git cat-file: {path} is missing at {rev}")
            data = answers.read(int(header[2]))
            answers.read(1)  # the newline after each object
            yield path, data
    finally:
        send.close()
        proc.wait()
        answers.close()


def read_blobs(repo: Path, specs: list[str]) -> Iterator[tuple[str, bytes | None]]:
    """The content of each `rev:path` spec (None when the path is missing there), one `git cat-file --batch`."""
    if not repo.is_dir():
        raise GitError(f"the archive repository folder {repo} does not exist (removed or not mounted?)")
    proc, send, answers = _cat_file_batch(repo)
    try:
        for spec in specs:
            send.write(f"{spec}\n".encode())
            send.flush()
            header = answers.readline().split()
            if len(header) < 3 or header[-1] == b"missing":
                yield spec, None
                continue
            data = answers.read(int(header[2]))
            answers.read(1)
            yield spec, data
    finally:
        send.close()
        proc.wait()
        answers.close()


def _cat_file_batch(repo: Path) -> tuple[subprocess.Popen[bytes], IO[bytes], IO[bytes]]:
    """A `git cat-file --batch` in `repo` with its request and answer pipes (both asked for, so
    both are there: the check only says so to the type checker)."""
    proc = subprocess.Popen(["git", "cat-file", "--batch"], cwd=repo, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, **_ENV})
    if proc.stdin is None or proc.stdout is None:
        proc.kill()
        proc.wait()
        raise GitError("git cat-file --batch started without its pipes")
    return proc, proc.stdin, proc.stdout
