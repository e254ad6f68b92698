"""`mcp-memory restore --from-archive PATH`: rebuild the database from the git archive.

Reads the committed content of `main` (not the working tree): sessions from the meta files, messages
from the jsonl lines (payload, append_id and created_at kept; payload_hash recomputed with
core.messages.payload_digest, so a client retrying an append gets `duplicate: true`), snapshots
with their own ids from the snapshot commits, and fork lineage. One transaction: all or nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import search
from ..errors import Invalid
from ..store.archive_repo import ArchiveStore, RestoredMessage
from ..store.db import Database
from . import gitrepo, layout

Progress = Callable[[int, int], None]


@dataclass
class RestoreResult:
    sessions: int = 0
    messages: int = 0
    snapshots: int = 0
    indexed: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "messages": self.messages, "snapshots": self.snapshots,
                "indexed": self.indexed, "warnings": self.warnings}

    def line(self) -> str:
        return f"restored {self.sessions} session(s), {self.messages} message(s), {self.snapshots} snapshot(s)"


def restore(db: Database, path: str | Path, *, force: bool = False,
            progress: Progress = lambda done, total: None) -> RestoreResult:
    repo = Path(path).expanduser().resolve()
    if not repo.is_dir() or gitrepo.head(repo) is None:
        raise Invalid(f"{repo} is not an archive repository (no commits on {layout.BRANCH})")
    files = gitrepo.list_files(repo)
    docs = _read_metas(repo, [p for p in files if p.endswith(".meta.json")])
    snapshots = read_snapshots(repo)
    result = RestoreResult()
    ordered = _parents_first(docs, result.warnings)
    jsonl = [layout.session_path(d["session_id"]) for d in ordered if layout.session_path(d["session_id"]) in files]
    with db.transaction() as conn:
        store = ArchiveStore(conn)
        if store.has_sessions() and not force:
            raise Invalid("the database already holds sessions; restore into an empty database, or pass --force "
                          "to add only what is missing")
        for doc in ordered:
            store.restore_session(doc)
        store.start_message_restore()
        projects = {d["session_id"]: d["project_id"] for d in ordered}
        for done, (file, data) in enumerate(gitrepo.read_files(repo, jsonl), start=1):
            result.messages += store.copy_messages(_messages(file, data, projects))
            progress(done, len(jsonl))
        store.finish_message_restore()
        for snap in snapshots:
            if snap.session_id not in projects:
                result.warnings.append(f"snapshot {snap.snapshot_id}: session {snap.session_id} is not in the archive")
                continue
            store.restore_snapshot({"snapshot_id": snap.snapshot_id, "session_id": snap.session_id,
                                    "project_id": snap.project_id, "up_to_seq": snap.up_to_seq,
                                    "commit_msg": snap.commit_msg, "meta": snap.meta, "created_by": snap.created_by,
                                    "created_at": snap.created_at})
            result.snapshots += 1
        for doc in ordered:
            if doc.get("parent_snapshot_id") is not None and doc.get("parent_session_id"):
                store.restore_parent_snapshot(doc["session_id"], doc["parent_snapshot_id"])
        store.restore_last_seq(list(projects))
        store.reset_snapshot_identity()
    result.sessions = len(ordered)
    result.indexed = search.reindex(db)  # restored rows bypassed append: give them their search rows
    return result


def read_snapshots(repo: Path) -> list[layout.SnapshotInfo]:
    """Snapshots from the snapshot commits on main, oldest first, each id once."""
    found: dict[int, layout.SnapshotInfo] = {}
    for message in gitrepo.commit_messages(repo):
        info = layout.parse_commit_message(message)
        if info is not None:
            found.setdefault(info.snapshot_id, info)
    return sorted(found.values(), key=lambda s: s.snapshot_id)


def _read_metas(repo: Path, paths: list[str]) -> dict[str, dict[str, Any]]:
    docs = {}
    for path, data in gitrepo.read_files(repo, paths):
        doc = layout.parse_meta(data.decode(), where=path)
        docs[doc["session_id"]] = doc
    return docs


def _parents_first(docs: dict[str, dict[str, Any]], warnings: list[str]) -> list[dict[str, Any]]:
    """Sessions ordered so that a fork comes after its parent (foreign key); a fork whose parent is not
    in the archive is restored without lineage, with a warning."""
    def depth(sid: str, seen: frozenset[str] = frozenset()) -> int:
        parent = docs[sid].get("parent_session_id")
        return 0 if parent not in docs or parent in seen else 1 + depth(parent, seen | {sid})

    for doc in docs.values():
        if doc.get("parent_session_id") and doc["parent_session_id"] not in docs:
            warnings.append(f"{doc['session_id']}: parent {doc['parent_session_id']} is not in the archive; "
                            "restored without its inherited history")
            doc.update(parent_session_id=None, fork_seq=None, parent_snapshot_id=None)
    return sorted(docs.values(), key=lambda d: (depth(d["session_id"]), d["session_id"]))


def _messages(path: str, data: bytes, projects: dict[str, str]) -> Iterator[RestoredMessage]:
    for number, raw in enumerate(data.splitlines(), start=1):
        m = layout.parse_line(raw.decode(), where=f"{path}:{number}")
        if m.session_id not in projects:
            raise Invalid(f"{path}:{number}: line of session {m.session_id}, which has no meta file")
        yield RestoredMessage(session_id=m.session_id, seq=m.seq, project_id=projects[m.session_id],
                              append_id=m.append_id, role=m.role, payload=m.payload, payload_hash=m.digest,
                              created_at=m.created_at)
