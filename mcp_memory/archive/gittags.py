"""Snapshot tags and the commits they point at: an annotated `snapshot-<id>` tag per exported
snapshot, an exact commit when the archive already holds a session beyond the snapshot, and the
lookups `archive verify` and a resumed export need (plain functions over a repo path, as gitrepo)."""

from __future__ import annotations

import json
from pathlib import Path

from . import layout
from .gitrepo import git, head, read_blobs


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

def tagged_commit(repo: Path, name: str) -> str:
    """The commit an (annotated) tag points at."""
    return git(repo, "rev-parse", f"refs/tags/{name}^{{commit}}").strip()

def tag_subject(repo: Path, name: str) -> str:
    """The first line of an annotated tag's message ("" for a lightweight or missing tag)."""
    return git(repo, "for-each-ref", f"refs/tags/{name}", "--format=%(contents:subject)", check=False).strip()

def tag_exists(repo: Path, name: str) -> bool:
    return bool(git(repo, "rev-parse", "-q", "--verify", f"refs/tags/{name}", check=False).strip())

def tag(repo: Path, name: str, rev: str, message: str) -> None:
    """Annotated tag; a no-op when it already exists (a retry after a crash)."""
    if not tag_exists(repo, name):
        git(repo, "tag", "-a", name, rev, "-F", "-", input=message)

def tag_subjects(repo: Path) -> dict[str, tuple[str, str]]:
    """snapshot-* tag name → (the commit it points at, the tag message's subject)."""
    out = git(repo, "for-each-ref", "--format=%(refname:short)%00%(*objectname)%00%(contents:subject)",
              "refs/tags/snapshot-*")
    found = {}
    for line in out.splitlines():
        parts = line.split("\x00")
        if len(parts) == 3:
            found[parts[0]] = (parts[1], parts[2])
    return found

def tags(repo: Path) -> dict[str, str]:
    """snapshot-* tag name → the commit it points at."""
    out = git(repo, "for-each-ref", "--format=%(refname:short) %(*objectname)", "refs/tags/snapshot-*")
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)

def tag_message(repo: Path, name: str) -> str:
    return git(repo, "cat-file", "-p", f"refs/tags/{name}").split("\n\n", 1)[-1]

def exact_commit(repo: Path, base: str, session_id: str, up_to_seq: int, message: str, *,
                 date: str | None = None) -> str:
    """A commit whose tree is `base`'s with sessions/<id>.jsonl cut after seq `up_to_seq`, child of
    `base` but on no branch: the tree of a snapshot whose session the archive already holds beyond it
    (an earlier snapshot exported after a later one), so that its tag holds exactly its own lines.
    Built with a private index: the working tree and main are not touched."""
    path = layout.session_path(session_id)
    ((_, data),) = read_blobs(repo, [f"{base}:{path}"])
    kept = []
    for line in (data or b"").splitlines(keepends=True):
        if int(json.loads(line)["seq"]) > up_to_seq:
            break
        kept.append(line)
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"".join(kept)).strip()
    index = Path(git(repo, "rev-parse", "--absolute-git-dir").strip()) / "mcp-memory-exact.index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git(repo, "read-tree", base, env=env)
        if kept:
            git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        else:
            git(repo, "update-index", "--force-remove", path, env=env)
        tree = git(repo, "write-tree", env=env).strip()
    finally:
        index.unlink(missing_ok=True)
    dated = {"GIT_AUTHOR_DATE": date} if date else {}
    return git(repo, "commit-tree", tree, "-p", base, "-F", "-", input=message, env=dated).strip()

def retag(repo: Path, name: str, rev: str, message: str) -> None:
    """Point an existing annotated tag at another commit (verify --repair)."""
    git(repo, "tag", "-f", "-a", name, rev, "-F", "-", input=message)


def highest_snapshot_id(repo: Path) -> int:
    """The highest id among the `snapshot-<id>` tags (0 when there is none): after a point-in-time
    restore the database's snapshot ids must move past it."""
    if not (repo / ".git").exists() and not (repo / "HEAD").exists():
        return 0
    out = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/tags/snapshot-*")
    ids = [int(name.removeprefix("snapshot-")) for name in out.split()
           if name.removeprefix("snapshot-").isdigit() and len(name) <= 40]
    return max(ids, default=0)
