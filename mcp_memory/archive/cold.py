"""Retention to cold storage (README, "Partitions"): a past month leaves the hot tables only when the
git archive holds every message of its sessions, and comes back from the archive whole.

Retiring with an archive (`db partitions --retire YYYY-MM --archive PATH [--drop]`):
1. the archive's `main` (fetched first when the clone has a remote) is read for the month's
   sessions, each file checked line by line (seqs contiguous from the fork point, every line still
   hashing to its payload_sha256);
2. in one transaction, the month's session rows are locked against appends (FOR SHARE), the
   database's own rows of each session are summed up as the archive check does (count, last seq,
   sha256 over the payload hashes in seq order) and compared with the archive's; any difference
   refuses the retirement and names the sessions, nothing detached;
3. in that transaction the month is detached (dropped with `--drop`) and the verified commit is
   recorded in retired_months.archive_commit.
Dropping needs the archive: a month is never dropped unverified.

Restoring (`db partitions --restore YYYY-MM [--archive PATH]`): a kept month is attached again; a
dropped one gets empty partitions that are filled from the archive's lines in the same transaction,
checked against the session rows (every session back up to its last seq, or nothing is restored),
then indexed for search again. Decisions, context and snapshots never left: they are not in the
month partitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import psycopg

from ..core import search
from ..errors import Conflict, Invalid, NotFound
from ..store import partitions
from ..store.archive_store import ArchiveStore
from ..store.cold_store import ColdStore, MonthSession
from ..store.db import Database, translate_errors
from . import gitrepo, layout, source, verify
from .blobs import BlobReader
from .restore import BadLine, Progress, SessionRows

SHOWN = 10  # sessions named in a refusal, at most


@dataclass
class ColdRetirement:
    retirement: partitions.Retirement
    archive_commit: str | None  # None: retired without an archive (kept as detached tables)
    verified_messages: int = 0


@dataclass
class ColdRestore:
    month: str
    parts: list[str] = field(default_factory=list)
    attached: bool = False  # kept tables attached again (True) or partitions filled from the archive
    sessions: int = 0
    messages: int = 0
    indexed: int = 0


def retire(db: Database, month: date, *, archive: str | Path | None, drop: bool) -> ColdRetirement:
    if drop and archive is None:
        raise Invalid("--drop needs --archive PATH: a month is dropped only after the archive was verified "
                      "to hold every message of its sessions")
    with db.connect(autocommit=True) as conn, translate_errors():
        if archive is None:
            return ColdRetirement(partitions.retire(conn, month, drop=False), None)
        with source.open_archive(archive) as src:
            rev, _ = verify.latest(src.repo, src.rev)
            archived = _archived(src.repo, rev, ColdStore(conn).month_sessions(month), db.settings.max_message_bytes)
        with conn.transaction():
            sessions = ColdStore(conn).month_sessions(month, lock=True)
            digests = ArchiveStore(conn).db_digests({s.session_id: s.last_seq for s in sessions})
            problems = [p for s in sessions for p in _differences(s, archived.get(s.session_id),
                                                                  digests.get(s.session_id))]
            if problems:
                raise Conflict(f"month {month:%Y-%m} stays in the hot tables: the archive at {rev[:12]} does not "
                               f"hold all of it ({len(problems)} difference(s): " + "; ".join(problems[:SHOWN])
                               + ("; …" if len(problems) > SHOWN else "")
                               + "); let the archiver catch up (mcp-memory archive --once), then retry")
            done = partitions.retire(conn, month, drop=drop)
            ColdStore(conn).record_commit(month, rev)
    return ColdRetirement(done, rev, sum(a.lines for a in archived.values()))


def restore(db: Database, month: date, *, archive: str | Path | None,
            progress: Progress = lambda done, total: None) -> ColdRestore:
    with db.connect(autocommit=True) as conn, translate_errors():
        store = ColdStore(conn)
        retired = store.retired(month)
        if retired is None:
            raise NotFound(f"month {month:%Y-%m} has not retired (mcp-memory db partitions lists the months)")
        dropped, commit = retired.dropped, retired.archive_commit
        out = ColdRestore(f"{month:%Y-%m}")
        if not dropped:
            with conn.transaction():
                out.parts, out.attached = [p for p, _ in store.restore_month(month)], True
            out.sessions = len(store.month_sessions(month))
            return out
        if archive is None:
            raise Invalid(f"month {month:%Y-%m} was dropped: --archive PATH is needed to bring it back "
                          f"(it was verified against archive commit {commit or 'unknown'})")
        with source.open_archive(archive) as src:
            rev, _ = verify.latest(src.repo, src.rev)
            if commit and not gitrepo.is_ancestor(src.repo, commit, rev):
                raise Conflict(f"the archive at {rev[:12]} does not contain commit {commit[:12]}, against which "
                               f"month {month:%Y-%m} was verified when it retired: this is not that archive")
            with BlobReader(src.repo, rev) as reader, conn.transaction():
                out.parts = [p for p, _ in store.restore_month(month)]
                out.sessions, out.messages = _refill(conn, reader, store.month_sessions(month),
                                                     db.settings.max_message_bytes, progress)
    out.indexed = search.reindex(db)
    return out


def _refill(conn: psycopg.Connection, reader: BlobReader, sessions: list[MonthSession], max_bytes: int,
            progress: Progress) -> tuple[int, int]:
    """Every session's own rows from the archive, each checked to reach its session row's last seq;
    raises Conflict (the caller's transaction rolls back: the month stays retired) otherwise."""
    store = ArchiveStore(conn)
    store.start_message_restore()
    max_line = 4 * max_bytes + 64 * 1024
    bad: list[BadLine] = []
    short: list[str] = []
    total = 0
    for done, s in enumerate(sessions, start=1):
        progress(done, len(sessions))
        path = layout.session_path(s.session_id)
        rows = SessionRows(path, reader.lines(path, max_line=max_line),
                           {"session_id": s.session_id, "project_id": s.project_id, "fork_seq": s.fork_seq}, bad)
        try:
            total += store.copy_session_messages(rows)
        finally:
            rows.close()
        if rows.last_seq != max(s.last_seq, s.fork_seq):
            short.append(f"{s.session_id}: the archive reaches seq {rows.last_seq}, the session {s.last_seq}")
    problems = short + [str(b) for b in bad]
    if problems:
        raise Conflict(f"the archive cannot bring the month back whole ({len(problems)} problem(s): "
                       + "; ".join(problems[:SHOWN]) + ("; …" if len(problems) > SHOWN else "")
                       + "); nothing was restored")
    return len(sessions), total


def _archived(repo: Path, rev: str, sessions: list[MonthSession], max_bytes: int) -> dict[str, verify.ArchivedSession]:
    """The archive's account of each session file (lines, last seq, digest, problems)."""
    present = set(gitrepo.list_files(repo, rev=rev))
    wanted = {layout.session_path(s.session_id): s for s in sessions}
    out = {s.session_id: verify.ArchivedSession(s.session_id, fork_seq=s.fork_seq, last_seq=s.fork_seq)
           for s in sessions}
    for path, data in gitrepo.read_files(repo, [p for p in wanted if p in present], rev=rev):
        verify.check_lines(out[wanted[path].session_id], path, data)
    return out


def _differences(s: MonthSession, archived: verify.ArchivedSession | None,
                 digest: tuple[int, int, bytes] | None) -> list[str]:
    """Why the archive does not hold the session whole: its own problems, the comparison `archive
    verify` makes (here against every own row, up to the session's last seq), and own rows that
    stop short of the session's last seq."""
    if archived is None:
        return [f"{s.session_id}: not read"]
    out = [f"{s.session_id}: {p}" for p in archived.problems] + verify.compare_lines(s.session_id, archived, digest)
    count, last, _ = digest or (0, 0, b"")
    if count and last < s.last_seq:
        out.append(f"{s.session_id}: its own messages end at seq {last}, the session at {s.last_seq}")
    return out
