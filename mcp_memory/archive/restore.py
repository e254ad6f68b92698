"""`mcp-memory restore --from-archive PATH`: rebuild the database from the git archive.

Reads the committed content of `main` (not the working tree; see source.py for clones, bare
repositories and URLs), one session file at a time and each file line by line (memory stays bounded
by the longest accepted line, whatever the size of the archive): sessions from the meta files,
messages from the jsonl lines (payload, append_id and created_at kept; payload_hash recomputed with
core.messages.payload_digest, so a client retrying an append gets `duplicate: true`), snapshots
with their own ids from the snapshot commits, and fork lineage.

One bad line never stops the rest: each session is restored on its own savepoint. A line that does
not parse, does not hash to its payload_sha256 or breaks the seq order ends its session there: the
lines before it are restored (history stays gap-free), it and the lines after it are listed in
`bad_lines` (file:line, why), and the snapshots beyond the restored part are left out. A session the
database refuses (a crafted meta) is listed and skipped with its forks. Forks are ordered after
their parents without recursion, so a chain of forks of any depth restores.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psycopg

from ..core import search
from ..core.decisions import decision_text
from ..errors import Invalid, McpMemoryError
from ..search.index import index_text
from ..store.archive_store import ArchiveStore, RestoredMessage
from ..store.db import Database
from . import blobs, gitrepo, layout, source
from .blobs import BlobReader, TooLong

Progress = Callable[[int, int], None]
SESSION_ID = re.compile(r"^ses_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
LISTED_PER_FILE = 100  # bad lines named one by one per memory file; the rest are counted (a bounded report)


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
    decisions: int = 0  # decision versions
    context: int = 0  # context revisions
    indexed: int = 0
    unattributed: int = 0  # messages whose line carried no written_by (an older archive): the owner's now
    owner: str = ""  # the role that restored (and stands in for a missing author)
    warnings: list[str] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    skipped_sessions: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.bad_lines and not self.skipped_sessions

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "sessions": self.sessions, "messages": self.messages, "snapshots": self.snapshots,
                "decision_versions": self.decisions, "context_revisions": self.context, "indexed": self.indexed,
                "messages_without_author": self.unattributed, "warnings": self.warnings,
                "bad_lines": [b.to_json() for b in self.bad_lines], "skipped_sessions": self.skipped_sessions}

    def line(self) -> str:
        text = (f"restored {self.sessions} session(s), {self.messages} message(s), {self.snapshots} snapshot(s), "
                f"{self.decisions} decision version(s), {self.context} context revision(s)")
        if self.unattributed:
            text += (f"; {self.unattributed} message(s) had no author recorded in the archive (an older archive): "
                     f"written_by is {self.owner or 'the restoring role'} for them")
        if not self.ok:
            text += f"; {len(self.bad_lines)} bad line(s), {len(self.skipped_sessions)} session(s) skipped"
        return text


def restore(db: Database, path: str | Path, *, force: bool = False,
            progress: Progress = lambda done, total: None) -> RestoreResult:
    """Restore the archive at `path`: a clone (whatever its checked-out branch), a bare repository or a
    git URL (both cloned to a temporary folder first)."""
    with source.open_archive(path) as archive, BlobReader(archive.repo, archive.rev) as reader:
        return _restore_from(db, archive, reader, force=force, progress=progress)


def _restore_from(db: Database, archive: source.Source, reader: BlobReader, *, force: bool,
                  progress: Progress) -> RestoreResult:
    repo, rev = archive.repo, archive.rev
    result = RestoreResult()
    max_line = 4 * db.settings.max_message_bytes + 64 * 1024  # a line is a message and a few fields
    files = set(gitrepo.list_files(repo, rev=rev))  # regular files at archive paths only: a link is never read
    result.bad_lines += [BadLine(path, 0, why) for path, why in gitrepo.refused_entries(repo, rev)]
    docs = _read_metas(reader, sorted(p for p in files if p.endswith(".meta.json")), max_line, result)
    ordered, cyclic = _parents_first(docs, result.warnings)
    for doc in cyclic:
        _skip(result, layout.meta_path(doc["session_id"]), "its lineage runs in a circle (a parent of its own)")
    restored: dict[str, int] = {}  # session → the last seq restored
    snapshot_ids: list[int] = []  # the snapshots restored, all in the archive already
    with db.transaction(bounded=False) as conn:  # a whole archive: as long as it takes
        store = ArchiveStore(conn)
        if store.has_sessions() and not force:
            raise Invalid("the database already holds sessions; restore into an empty database, or pass --force "
                          "to add only what is missing")
        result.owner = store.current_role()
        store.start_message_restore()
        for done, doc in enumerate(ordered, start=1):
            sid = doc["session_id"]
            progress(done, len(ordered))
            if doc.get("parent_session_id") and doc["parent_session_id"] not in restored:
                _skip(result, layout.meta_path(sid), f"its parent {doc['parent_session_id']} was not restored")
                continue
            file = layout.session_path(sid)
            lines = reader.lines(file, max_line=max_line) if file in files else iter(())
            rows = SessionRows(file, lines, doc, result.bad_lines)
            try:
                with conn.transaction():
                    store.restore_session(doc)
                    result.messages += store.copy_session_messages(rows)
                    result.unattributed += rows.unattributed
            except psycopg.Error as exc:
                _skip(result, layout.meta_path(sid), f"the database refused the session: {_reason(exc)}")
                continue
            finally:
                rows.close()
            restored[sid] = rows.last_seq
            _restore_memory(store, conn, reader, files, doc, max_line, result)
        _restore_snapshots(store, conn, read_snapshots(repo, rev, max_bytes=max_line), restored, result,
                           snapshot_ids)
        for doc in ordered:
            if doc["session_id"] in restored and doc.get("parent_snapshot_id") is not None \
                    and doc.get("parent_session_id"):
                store.restore_parent_snapshot(doc["session_id"], doc["parent_snapshot_id"])
        store.restore_last_seq(list(restored))
        store.restore_mark_archived(snapshot_ids)  # archived already: no false archive lag after a restore
        store.reset_snapshot_identity()
    result.sessions = len(restored)
    result.indexed = search.reindex(db)  # restored rows bypassed append: give them their search rows
    return result


def _restore_memory(store: ArchiveStore, conn: psycopg.Connection, reader: BlobReader, files: set[str],
                    doc: dict[str, Any], max_line: int, result: RestoreResult) -> None:
    """The session's decisions (every version, oldest first: the first inserts, later ones update, so
    the versions table fills again) and context revisions; each line on its own savepoint, a refused
    one listed in bad_lines."""
    sid, project = doc["session_id"], doc["project_id"]
    decisions = _memory_rows(reader, files, layout.decisions_path(sid), "decision", max_line, result)
    decisions.sort(key=lambda item: (str(item[1]["decision_id"]), item[1]["version"]))
    first_seen: set[str] = set()
    for number, row in decisions:
        first = row["decision_id"] not in first_seen
        first_seen.add(row["decision_id"])
        listed = row.get("alternatives")
        alternatives: list[Any] = listed if isinstance(listed, list) else []
        text = decision_text(str(row.get("decision_type") or ""), str(row.get("summary") or ""),
                             row.get("rationale") if isinstance(row.get("rationale"), str) else None,
                             [a for a in alternatives if isinstance(a, dict) and "option" in a])
        if _memory_write(conn, result, layout.decisions_path(sid), number,
                         partial(store.restore_decision, session_id=sid, project_id=project, row=row,
                                 tsv=index_text(text).tsv, first=first)):
            result.decisions += 1
    for number, row in _memory_rows(reader, files, layout.context_path(sid), "context", max_line, result):
        if _memory_write(conn, result, layout.context_path(sid), number,
                         partial(store.restore_context, session_id=sid, project_id=project, row=row)):
            result.context += 1


def _memory_rows(reader: BlobReader, files: set[str], path: str, kind: str, max_line: int,
                 result: RestoreResult) -> list[tuple[int, dict[str, Any]]]:
    if path not in files:
        return []
    rows = []
    bad = _BadLines(path)
    for number, raw in enumerate(reader.lines(path, max_line=max_line), start=1):
        try:
            if isinstance(raw, TooLong):
                raise Invalid(f"a line of {raw.size} bytes, longer than any row the server accepts")
            if not raw.strip():  # no exception built per line: a file of blank lines reads at once
                bad.add(number, "an empty line")
                continue
            rows.append((number, layout.parse_memory_line(raw.decode(), where=f"{path}:{number}", kind=kind)))
        except (McpMemoryError, UnicodeDecodeError, RecursionError) as exc:
            why = str(exc).removeprefix(f"{path}:{number}: ") if not isinstance(exc, RecursionError) \
                else "JSON nested too deeply"
            bad.add(number, why)
    result.bad_lines += bad.listed()
    return rows


class _BadLines:
    """A file's bad lines: the first LISTED_PER_FILE by line, the rest counted in one more entry, so a
    file of millions of bad lines gives a report (and a memory footprint) of a hundred."""

    def __init__(self, path: str) -> None:
        self.path, self.lines, self.unlisted, self.first_unlisted = path, list[BadLine](), 0, 0

    def add(self, number: int, why: str) -> None:
        if len(self.lines) < LISTED_PER_FILE:
            self.lines.append(BadLine(self.path, number, why))
        else:
            self.unlisted += 1
            self.first_unlisted = self.first_unlisted or number

    def listed(self) -> list[BadLine]:
        more = [BadLine(self.path, self.first_unlisted, f"and {self.unlisted} more bad line(s) from this one on, "
                        "not listed one by one")] if self.unlisted else []
        return self.lines + more


def _memory_write(conn: psycopg.Connection, result: RestoreResult, path: str, number: int,
                  write: Callable[[], int]) -> bool:
    """True when the line's row went in (an existing one, with --force, is not counted)."""
    try:
        with conn.transaction():
            return write() > 0
    except psycopg.Error as exc:
        result.bad_lines.append(BadLine(path, number, f"the database refused it: {_reason(exc)}"))
        return False


def _restore_snapshots(store: ArchiveStore, conn: psycopg.Connection, snapshots: Iterable[layout.SnapshotInfo],
                       restored: dict[str, int], result: RestoreResult, snapshot_ids: list[int]) -> None:
    for snap in snapshots:
        if snap.session_id not in restored:
            result.warnings.append(f"snapshot {snap.snapshot_id}: session {snap.session_id} was not restored")
            continue
        if snap.up_to_seq > restored[snap.session_id]:
            result.warnings.append(f"snapshot {snap.snapshot_id}: up to seq {snap.up_to_seq}, beyond the "
                                   f"restored part of {snap.session_id} (seq {restored[snap.session_id]}); left out")
            continue
        if snap.created_at is not None and (why := layout.time_problem(snap.created_at)):
            result.warnings.append(f"snapshot {snap.snapshot_id}: {why}; left out")
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
        snapshot_ids.append(snap.snapshot_id)


def read_snapshots(repo: Path, rev: str, *, max_bytes: int) -> list[layout.SnapshotInfo]:
    """Snapshots from the snapshot commits on main (or `rev`) and those its snapshot tags point at
    off main (an exact tag: verify --repair), each id once, in id order; messages streamed from one
    `git log`, each bounded by `max_bytes`."""
    found: dict[int, layout.SnapshotInfo] = {}
    for message in blobs.commit_messages(repo, rev, max_bytes=max_bytes, tags="snapshot-*"):
        if isinstance(message, TooLong):
            continue  # no snapshot commit is that long
        try:
            info = layout.parse_commit_message(message.decode())
        except (McpMemoryError, ValueError, KeyError, TypeError, RecursionError):
            continue
        if info is not None:
            found.setdefault(info.snapshot_id, info)
    return sorted(found.values(), key=lambda s: s.snapshot_id)


def _skip(result: RestoreResult, file: str, why: str, *, line: int = 0) -> None:
    result.bad_lines.append(BadLine(file, line, why))
    result.skipped_sessions.append(Path(file).name.removesuffix(".meta.json"))


def _reason(exc: psycopg.Error) -> str:
    return exc.diag.message_primary or str(exc).splitlines()[0]


def _read_metas(reader: BlobReader, paths: list[str], max_bytes: int,
                result: RestoreResult) -> dict[str, dict[str, Any]]:
    docs = {}
    for path in paths:
        data = _whole(reader, path, max_bytes)
        if data is None:
            _skip(result, path, f"larger than {max_bytes} bytes, far more than a session's meta holds")
            continue
        try:
            doc = layout.parse_meta(data.decode(), where=path)
        except (McpMemoryError, UnicodeDecodeError) as exc:
            _skip(result, path, str(exc).removeprefix(f"{path}: "))
            continue
        except RecursionError:
            _skip(result, path, "JSON nested too deeply")
            continue
        sid = doc["session_id"]
        if path != layout.meta_path(sid) or not SESSION_ID.match(sid):
            _skip(result, path, f"session_id {sid!r} does not name this file")
            continue
        if why := layout.time_problem(doc.get("created_at")):
            _skip(result, path, why, line=_key_line(data, "created_at"))
            continue
        docs[sid] = doc
    return docs


def _key_line(data: bytes, key: str) -> int:
    """The line of the last top-level `"key":` of an indented meta document (the one json keeps), 0
    when the document is not laid out so."""
    found = 0
    for number, line in enumerate(data.split(b"\n"), start=1):
        if line.startswith(b'  "' + key.encode() + b'"'):
            found = number
    return found


def _whole(reader: BlobReader, path: str, max_bytes: int) -> bytes | None:
    """The file's content, or None when it is longer than max_bytes (read through, never held)."""
    parts: list[bytes] = []
    size = 0
    for line in reader.lines(path, max_line=max_bytes):
        size += line.size if isinstance(line, TooLong) else len(line) + 1
        if size <= max_bytes and not isinstance(line, TooLong):
            parts.append(line)
        else:
            parts.clear()
    return b"\n".join(parts) if size <= max_bytes else None


def _parents_first(docs: dict[str, dict[str, Any]],
                   warnings: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Sessions ordered so that a fork comes after its parent (foreign key), breadth first from the
    sessions without a parent: no recursion, so a chain of any depth is fine. A fork whose parent is not
    in the archive is restored without lineage, with a warning. Returns (ordered, the sessions on or
    below a lineage cycle, which no order can satisfy)."""
    for doc in docs.values():
        if doc.get("parent_session_id") and doc["parent_session_id"] not in docs:
            warnings.append(f"{doc['session_id']}: parent {doc['parent_session_id']} is not in the archive; "
                            "restored without its inherited history")
            doc.update(parent_session_id=None, fork_seq=None, parent_snapshot_id=None)
    children: dict[str, list[str]] = defaultdict(list)
    queue: deque[str] = deque()
    for sid in sorted(docs):
        parent = docs[sid].get("parent_session_id")
        if parent:
            children[parent].append(sid)
        else:
            queue.append(sid)
    ordered = []
    while queue:
        sid = queue.popleft()
        ordered.append(docs[sid])
        queue.extend(children.pop(sid, ()))
    placed = {d["session_id"] for d in ordered}
    return ordered, [docs[sid] for sid in sorted(docs) if sid not in placed]


class SessionRows:
    """A session's lines as restored rows, streamed into COPY, up to the first bad one (which, with the
    count of lines after it, is added to `bad`): seqs must run on from the fork point without a gap."""

    def __init__(self, path: str, lines: Iterator[bytes | TooLong], doc: dict[str, Any], bad: list[BadLine]) -> None:
        self.path, self.lines, self.doc, self.bad = path, lines, doc, bad
        self.last_seq = doc.get("fork_seq") or 0
        self.unattributed = 0  # lines without written_by

    def close(self) -> None:
        close = getattr(self.lines, "close", None)
        if close is not None:
            close()

    def __iter__(self) -> Iterator[RestoredMessage]:
        sid, expected = self.doc["session_id"], self.last_seq + 1
        for number, raw in enumerate(self.lines, start=1):
            try:
                m = _parse(raw, f"{self.path}:{number}", sid, expected)
            except (McpMemoryError, UnicodeDecodeError) as exc:
                why = str(exc).removeprefix(f"{self.path}:{number}: ")
                after = sum(1 for _ in self.lines)
                tail = f"; session restored up to seq {expected - 1}" + (f", {after} later line(s) left out" if after else "")
                self.bad.append(BadLine(self.path, number, why + tail))
                return
            yield RestoredMessage(session_id=sid, seq=m.seq, project_id=self.doc["project_id"],
                                  append_id=m.append_id, role=m.role, payload=m.payload, payload_hash=m.digest,
                                  created_at=m.created_at, written_by=m.written_by)
            self.unattributed += m.written_by is None
            self.last_seq = expected
            expected += 1


def _parse(raw: bytes | TooLong, where: str, session_id: str, expected: int) -> layout.ArchivedMessage:
    if isinstance(raw, TooLong):
        raise Invalid(f"a line of {raw.size} bytes, longer than any message the server accepts")
    try:
        m = layout.parse_line(raw.decode(), where=where)
    except RecursionError:  # JSON nested deeper than any message the server stores
        raise Invalid("JSON nested too deeply") from None
    if m.session_id != session_id:
        raise Invalid(f"a line of session {m.session_id}")
    if m.seq != expected:
        raise Invalid(f"seq {m.seq} where {expected} was expected")
    if _has_nul(m.payload) or m.role not in ("system", "user", "assistant", "tool"):
        raise Invalid("a value the database cannot store (NUL or an unknown role)")
    return m


def _has_nul(value: Any) -> bool:
    """PostgreSQL text and jsonb cannot hold U+0000 (walked without recursion: any depth)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
