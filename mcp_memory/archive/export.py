"""Export one snapshot into the git archive: append the missing lines, rewrite the meta when it
changed, commit, tag. Idempotent at every step, so a crash anywhere converges on the next run:

- the session's files are first put back to their last commit, so the jsonl's last seq is the
  watermark and a tag holds exactly the lines up to its snapshot (what a failed run left is dropped
  and exported again); no line is repeated;
- every row must hash to its payload_hash, or the export fails naming the session and seq (Tampered);
- a commit already made for this snapshot (crash before the tag) is found and tagged, not redone;
- an existing tag means the snapshot is already exported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..core.messages import payload_digest
from ..errors import Conflict, Invalid, NotFound
from ..schema import format_time
from ..store.archive_store import ArchiveStore, ExportRow
from ..store.db import Database
from . import gitrepo, gittags, layout, worktree

CRASH_POINTS = ("mid-write", "after-write", "after-commit", "after-tag")
CHUNK_LINES = 2000
READ_PAGE = 5000  # messages per read transaction (one short transaction each: never near call_timeout)
READ_PAGE_BYTES = 32 * 1024 * 1024  # and about this much payload: memory stays bounded by large messages

Checkpoint = Callable[[str], None]
Progress = Callable[[int, int], None]


def _no_checkpoint(point: str) -> None:
    return None


def _no_progress(seq: int, up_to_seq: int) -> None:
    return None


@dataclass(frozen=True)
class Exported:
    snapshot_id: int
    session_id: str
    up_to_seq: int
    lines: int
    commit: str
    already: bool = False  # the tag existed: exported before (a retry)


def export_snapshot(db: Database, repo: Path, snapshot_id: int, *, checkpoint: Checkpoint = _no_checkpoint,
                    progress: Progress = _no_progress) -> Exported:
    """Make `snapshot-<id>` exist in `repo`, tagging a commit whose tree holds the session's lines up to
    the snapshot's seq. The lines are read in pages of READ_PAGE messages, each page its own short
    transaction (messages up to a snapshot never change), so a session of any size never meets one
    call's deadline; `progress(seq, up_to_seq)` after each page. `checkpoint(point)` is called at
    each CRASH_POINTS step (crash tests)."""
    tag = layout.tag_name(snapshot_id)
    with db.transaction() as conn:
        row = ArchiveStore(conn).export_snapshot(snapshot_id)
    if row is None:
        raise NotFound(f"snapshot {snapshot_id} does not exist")
    info = snapshot_info(row)
    if gittags.tag_exists(repo, tag):
        _same_snapshot(repo, tag, info.snapshot_id, info.session_id, info.up_to_seq)
        return Exported(snapshot_id, "", 0, 0, gittags.tagged_commit(repo, tag), already=True)
    sid = info.session_id
    subject = layout.subject(info.snapshot_id, sid, info.up_to_seq)
    date = _git_date(row["snapshot_created_at"])
    sha = gittags.find_recent_commit(repo, subject)
    written = 0
    if sha is None:
        gitrepo.reset_paths(repo, layout.session_paths(sid))
        watermark = gitrepo.session_watermark(repo, sid)
        if watermark > info.up_to_seq and (base := gitrepo.head(repo)) is not None:
            # a later snapshot of the session was exported first (this one was retried after failing
            # for good): its tag gets a tree with exactly its lines, beside main
            sha = gittags.exact_commit(repo, base, sid, info.up_to_seq, layout.commit_message(info), date=date)
            gittags.tag(repo, tag, sha, subject + "\n")
            return Exported(snapshot_id, sid, info.up_to_seq, 0, sha)
        pages = _pages(db, sid, after=max(watermark, row["fork_seq"] or 0), up_to=info.up_to_seq, progress=progress)
        counter = _Counter()
        gitrepo.append_session_lines(repo, sid, _chunks(sid, pages, counter), midway=lambda: checkpoint("mid-write"))
        written = counter.lines
        with db.transaction() as conn:
            store = ArchiveStore(conn)
            _append_missing(repo, layout.decisions_path(sid), store.export_decisions(sid), layout.decision_key)
            _append_missing(repo, layout.context_path(sid), store.export_context(sid), layout.context_key)
        checkpoint("after-write")
        worktree.write_if_changed(repo, layout.meta_path(sid), layout.meta_document(row))
        # The files as they are now: the lines and meta just written (reset_paths removed whatever an
        # earlier run left uncommitted; git add of an unchanged file costs a stat).
        paths = [p for p in layout.session_paths(sid) if (repo / p).exists()]
        sha = gitrepo.commit(repo, paths, layout.commit_message(info), date=date)
        checkpoint("after-commit")
    gittags.tag(repo, tag, sha, subject + "\n")
    checkpoint("after-tag")
    return Exported(snapshot_id, sid, info.up_to_seq, written, sha)


def _same_snapshot(repo: Path, tag: str, snapshot_id: int, session_id: str, up_to_seq: int) -> None:
    """An existing tag is this snapshot exported before (a retry) — unless the database's snapshot ids
    went back (restored to an earlier point in time) and the id now names another snapshot: then
    nothing is skipped silently."""
    held = layout.parse_subject(gittags.tag_subject(repo, tag))
    if held is not None and held != (snapshot_id, session_id, up_to_seq):
        raise IdTaken(f"{tag} in the archive holds {held[1]} up to seq {held[2]}, but snapshot {snapshot_id} is "
                       f"now {session_id} up to seq {up_to_seq}: the database's snapshot ids went back (restored "
                       "to an earlier point?); the archiver gives the snapshot the next free id past the "
                       "archive's highest tag (install/README.md, Backup and point-in-time restore)", snapshot_id)


def _pages(db: Database, session_id: str, *, after: int, up_to: int, progress: Progress) -> Iterator[ExportRow]:
    """The session's rows after `after` up to `up_to`, READ_PAGE per transaction."""
    while after < up_to:
        with db.transaction() as conn:
            page = ArchiveStore(conn).export_page(session_id, after_seq=after, up_to_seq=up_to, limit=READ_PAGE,
                                                  max_bytes=READ_PAGE_BYTES)
        if not page:
            return
        yield from page
        after = page[-1].seq
        progress(after, up_to)


def _append_missing(repo: Path, relpath: str, rows: list[dict[str, Any]],
                    key: Callable[[dict[str, Any]], tuple[str, int]]) -> int:
    """Append the rows whose key (decision version, context revision) the file does not hold yet."""
    held = set()
    for line in worktree.read_working_file(repo, relpath).splitlines():
        try:
            held.add(key(json.loads(line)))
        except (ValueError, TypeError, AttributeError):
            continue  # verify names a bad line; the row it should have been is appended again
    missing = [layout.memory_line(row) for row in rows if key(row) not in held]
    if missing:
        worktree.append_lines(repo, relpath, ["".join(missing)])
    return len(missing)


def snapshot_info(row: dict[str, Any]) -> layout.SnapshotInfo:
    return layout.SnapshotInfo(
        snapshot_id=row["snapshot_id"], session_id=row["session_id"], project_id=row["project_id"],
        up_to_seq=row["up_to_seq"], commit_msg=row["commit_msg"],
        created_at=format_time(row["snapshot_created_at"]), created_by=row["snapshot_created_by"],
        meta=row["snapshot_meta"] or {},
    )


class IdTaken(Conflict):
    """The snapshot's id names another snapshot in the archive (the database went back to an earlier
    point): the archiver renumbers the snapshot instead of retrying (daemon._renumber)."""

    def __init__(self, message: str, snapshot_id: int) -> None:
        super().__init__(message)
        self.snapshot_id = snapshot_id


class Tampered(Invalid):
    """A stored row whose payload does not hash to its payload_hash: it is never archived (restore
    would refuse the line), and retrying does not make it right."""


class _Counter:
    lines = 0


def _chunks(session_id: str, rows: Iterator[ExportRow], counter: _Counter) -> Iterator[str]:
    """Lines joined in chunks: one write per CHUNK_LINES lines, never the whole session in memory."""
    batch: list[str] = []
    for r in rows:
        if payload_digest(r.payload) != r.payload_hash:
            raise Tampered(f"session {session_id} seq {r.seq}: the stored payload does not match its payload_hash "
                           "(changed outside the write functions); not archived")
        batch.append(layout.message_line(session_id=session_id, seq=r.seq, append_id=r.append_id,
                                         payload=r.payload, created_at=r.created_at, payload_hash=r.payload_hash,
                                         written_by=r.written_by))
        if len(batch) >= CHUNK_LINES:
            counter.lines += len(batch)
            yield "".join(batch)
            batch = []
    counter.lines += len(batch)
    yield "".join(batch)


def _git_date(value: datetime) -> str:
    """The snapshot's time as the commit's author date (git's raw `@epoch +0000` form)."""
    return f"@{int(value.timestamp())} +0000"
