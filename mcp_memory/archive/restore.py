"""`mcp-memory restore --from-archive PATH`: rebuild the database from the git archive.

Reads the committed content of `main` (not the working tree): sessions from the meta files, messages
from the jsonl lines (payload, append_id and created_at kept; payload_hash recomputed with
core.messages.payload_digest, so a client retrying an append gets `duplicate: true`), snapshots
with their own ids from the snapshot commits, and fork lineage.

One bad line never stops the rest: each session is restored on its own savepoint. A line that does
not parse, does not hash to its payload_sha256 or breaks the seq order ends its session there: the
lines before it are restored (history stays gap-free), it and the lines after it are listed in
`bad_lines` (file:line, why), and the snapshots beyond the restored part are left out. A session the
database refuses (a crafted meta) is listed and skipped with its forks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from ..core import search
from ..errors import Invalid, McpMemoryError
from ..store.archive_store import ArchiveStore, RestoredMessage
from ..store.db import Database
from . import gitrepo, layout

Progress = Callable[[int, int], None]
SESSION_ID = re.compile(r"^ses_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class BadLine:
    file: str
    line: int  # 0: the file as a whole
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "why": self.why}

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.why}" if self.line else f"{self.file}: {self.why}"


@dataclass
class RestoreResult:
    sessions: int = 0
    messages: int = 0
    snapshots: int = 0
    indexed: int = 0
    warnings: list[str] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    skipped_sessions: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.bad_lines and not self.skipped_sessions

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "sessions": self.sessions, "messages": self.messages, "snapshots": self.snapshots,
                "indexed": self.indexed, "warnings": self.warnings,
                "bad_lines": [b.to_json() for b in self.bad_lines], "skipped_sessions": self.skipped_sessions}

    def line(self) -> str:
        text = f"restored {self.sessions} session(s), {self.messages} message(s), {self.snapshots} snapshot(s)"
        if not self.ok:
            text += f"; {len(self.bad_lines)} bad line(s), {len(self.skipped_sessions)} session(s) skipped"
        return text


def restore(db: Database, path: str | Path, *, force: bool = False,
            progress: Progress = lambda done, total: None) -> RestoreResult:
    repo = Path(path).expanduser().resolve()
    if not repo.is_dir() or gitrepo.head(repo) is None:
        raise Invalid(f"{repo} is not an archive repository (no commits on {layout.BRANCH})")
    result = RestoreResult()
    files = gitrepo.list_files(repo)  # regular files at archive paths only: a link is never read
    result.bad_lines += [BadLine(path, 0, why) for path, why in gitrepo.refused_entries(repo)]
    docs = _read_metas(repo, [p for p in files if p.endswith(".meta.json")], result)
    snapshots = read_snapshots(repo)
    ordered = _parents_first(docs, result.warnings)
    restored: dict[str, int] = {}  # session → the last seq restored
    with db.transaction(bounded=False) as conn:  # a whole archive: as long as it takes
        store = ArchiveStore(conn)
        if store.has_sessions() and not force:
            raise Invalid("the database already holds sessions; restore into an empty database, or pass --force "
                          "to add only what is missing")
        store.start_message_restore()
        jsonl = {layout.session_path(d["session_id"]): d for d in ordered}
        contents = dict(gitrepo.read_files(repo, [p for p in jsonl if p in files]))
        for done, doc in enumerate(ordered, start=1):
            sid = doc["session_id"]
            if doc.get("parent_session_id") and doc["parent_session_id"] not in restored:
                _skip(result, layout.meta_path(sid), f"its parent {doc['parent_session_id']} was not restored")
                continue
            file = layout.session_path(sid)
            rows = _messages(file, contents.get(file, b""), doc, result.bad_lines)
            try:
                with conn.transaction():
                    store.restore_session(doc)
                    result.messages += store.copy_session_messages(rows)
            except psycopg.Error as exc:
                _skip(result, layout.meta_path(sid), f"the database refused the session: {_reason(exc)}")
                continue
            restored[sid] = rows[-1].seq if rows else (doc.get("fork_seq") or 0)
            progress(done, len(ordered))
        for snap in snapshots:
            if snap.session_id not in restored:
                result.warnings.append(f"snapshot {snap.snapshot_id}: session {snap.session_id} was not restored")
                continue
            if snap.up_to_seq > restored[snap.session_id]:
                result.warnings.append(f"snapshot {snap.snapshot_id}: up to seq {snap.up_to_seq}, beyond the "
                                       f"restored part of {snap.session_id} (seq {restored[snap.session_id]}); left out")
                continue
            try:
                with conn.transaction():
                    store.restore_snapshot({"snapshot_id": snap.snapshot_id, "session_id": snap.session_id,
                                            "project_id": snap.project_id, "up_to_seq": snap.up_to_seq,
                                            "commit_msg": snap.commit_msg, "meta": snap.meta,
                                            "created_by": snap.created_by, "created_at": snap.created_at})
            except psycopg.Error as exc:
                result.warnings.append(f"snapshot {snap.snapshot_id}: the database refused it: {_reason(exc)}")
                continue
            result.snapshots += 1
        for doc in ordered:
            if doc["session_id"] in restored and doc.get("parent_snapshot_id") is not None \
                    and doc.get("parent_session_id"):
                store.restore_parent_snapshot(doc["session_id"], doc["parent_snapshot_id"])
        store.restore_last_seq(list(restored))
        store.reset_snapshot_identity()
    result.sessions = len(restored)
    result.indexed = search.reindex(db)  # restored rows bypassed append: give them their search rows
    return result


def read_snapshots(repo: Path) -> list[layout.SnapshotInfo]:
    """Snapshots from the snapshot commits on main, oldest first, each id once."""
    found: dict[int, layout.SnapshotInfo] = {}
    for message in gitrepo.commit_messages(repo):
        try:
            info = layout.parse_commit_message(message)
        except (McpMemoryError, ValueError, KeyError, TypeError):
            continue
        if info is not None:
            found.setdefault(info.snapshot_id, info)
    return sorted(found.values(), key=lambda s: s.snapshot_id)


def _skip(result: RestoreResult, file: str, why: str) -> None:
    result.bad_lines.append(BadLine(file, 0, why))
    result.skipped_sessions.append(Path(file).name.removesuffix(".meta.json"))


def _reason(exc: psycopg.Error) -> str:
    return exc.diag.message_primary or str(exc).splitlines()[0]


def _read_metas(repo: Path, paths: list[str], result: RestoreResult) -> dict[str, dict[str, Any]]:
    docs = {}
    for path, data in gitrepo.read_files(repo, paths):
        try:
            doc = layout.parse_meta(data.decode(), where=path)
        except (McpMemoryError, UnicodeDecodeError) as exc:
            _skip(result, path, str(exc).removeprefix(f"{path}: "))
            continue
        sid = doc["session_id"]
        if path != layout.meta_path(sid) or not SESSION_ID.match(sid):
            _skip(result, path, f"session_id {sid!r} does not name this file")
            continue
        docs[sid] = doc
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


def _messages(path: str, data: bytes, doc: dict[str, Any], bad: list[BadLine]) -> list[RestoredMessage]:
    """The session's lines up to the first bad one (which, with the count of lines after it, is added
    to `bad`): seqs must run on from the fork point without a gap."""
    sid, rows = doc["session_id"], []
    expected = (doc.get("fork_seq") or 0) + 1
    lines = data.splitlines()
    for number, raw in enumerate(lines, start=1):
        try:
            m = layout.parse_line(raw.decode(), where=f"{path}:{number}")
            if m.session_id != sid:
                raise Invalid(f"a line of session {m.session_id}")
            if m.seq != expected:
                raise Invalid(f"seq {m.seq} where {expected} was expected")
            if _has_nul(m.payload) or m.role not in ("system", "user", "assistant", "tool"):
                raise Invalid("a value the database cannot store (NUL or an unknown role)")
        except (McpMemoryError, UnicodeDecodeError) as exc:
            why = str(exc).removeprefix(f"{path}:{number}: ")
            after = len(lines) - number
            tail = f"; session restored up to seq {expected - 1}" + (f", {after} later line(s) left out" if after else "")
            bad.append(BadLine(path, number, why + tail))
            break
        rows.append(RestoredMessage(session_id=sid, seq=m.seq, project_id=doc["project_id"], append_id=m.append_id,
                                    role=m.role, payload=m.payload, payload_hash=m.digest, created_at=m.created_at))
        expected += 1
    return rows


def _has_nul(value: Any) -> bool:
    """PostgreSQL text and jsonb cannot hold U+0000."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False
