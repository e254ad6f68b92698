"""Where `restore --from-archive` reads from: a clone, the bare remote itself, or a remote URL.

After the archiver host is lost, one clones the remote and restores from the clone. A remote made
with plain `git init --bare` names `master` in its HEAD, so such a clone may have no local `main`
(git warns and checks nothing out): the archive is then read from `origin/main`. A bare repository
or a URL is cloned (bare, into a temporary folder removed afterwards) rather than read in place, so
that nothing in a repository someone else controls (its config, its hooks) runs here.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import Invalid
from . import gitrepo, layout

CLONE_TIMEOUT = 3600.0  # a whole archive over a slow link


@dataclass(frozen=True)
class Source:
    repo: Path  # a repository git commands run in
    rev: str  # the commit of `main` to read


@contextmanager
def open_archive(path: str | Path) -> Iterator[Source]:
    """The archive at `path` (a clone's folder, a bare repository or a git URL) and the commit of its
    `main`; raises Invalid naming what is missing."""
    text = str(path)
    local = Path(text).expanduser()
    if local.is_dir() and (local / ".git").exists():
        repo = local.resolve()
        yield Source(repo, _main_of(repo, text))
        return
    if local.is_dir() and not _is_bare(local):
        raise Invalid(f"{local.resolve()} is not an archive repository (not a git repository)")
    if not local.is_dir() and not _looks_like_url(text):
        raise Invalid(f"{local.resolve()} is not an archive repository (no such folder, and not a git URL)")
    origin = str(local.resolve()) if local.is_dir() else text
    folder = Path(tempfile.mkdtemp(prefix="mcp-memory-restore-"))
    try:
        try:
            # with the snapshot tags: a snapshot exported after a later one is on a tag only
            gitrepo.git(folder, "clone", "-q", "--bare", "--", origin, "archive.git",
                        timeout=CLONE_TIMEOUT)
        except gitrepo.GitError as exc:
            raise Invalid(f"cannot clone the archive from {text}: {exc}") from None
        repo = folder / "archive.git"
        yield Source(repo, _main_of(repo, text))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _main_of(repo: Path, shown: str) -> str:
    """The commit of main: the local branch, else the remote-tracking one (a clone whose HEAD named
    another branch has no local main)."""
    candidates = [f"refs/heads/{layout.BRANCH}", f"refs/remotes/{gitrepo.REMOTE}/{layout.BRANCH}"]
    others = gitrepo.git(repo, "for-each-ref", "--format=%(refname)", f"refs/remotes/*/{layout.BRANCH}",
                         check=False).split()
    for ref in candidates + sorted(others):
        sha = gitrepo.git(repo, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False).strip()
        if sha:
            return sha
    raise Invalid(f"{shown} is not an archive repository (no commits on {layout.BRANCH}, "
                  f"nor on {gitrepo.REMOTE}/{layout.BRANCH})")


def _is_bare(folder: Path) -> bool:
    return (folder / "HEAD").is_file() and (folder / "objects").is_dir() and (folder / "refs").is_dir()


def _looks_like_url(text: str) -> bool:
    """scheme://… or scp-like user@host:path (git's own two spellings of a remote)."""
    if "://" in text:
        return True
    head, colon, _ = text.partition(":")
    return bool(colon) and "/" not in head and len(head) > 1
