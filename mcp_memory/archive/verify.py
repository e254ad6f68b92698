"""`archive verify`: does the archive hold exactly what the database says it should?

Per session: message count, last seq and a content hash (sha256 over the payload hashes in seq order)
of the archive's committed lines against the database's own rows up to the same seq; plus every line
intact (its content still hashes to its payload_sha256), seqs contiguous and unique, the archive not
behind the snapshots marked done, a tag for each of them, and lineage equal to the database's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Invalid, McpMemoryError
from ..store.archive_store import ArchiveStore
from ..store.db import Database
from . import gitrepo, gittags, layout, source

log = logging.getLogger(__name__)
FETCH_TIMEOUT = 600.0
LINEAGE = ("parent_session_id", "fork_seq", "parent_snapshot_id")


@dataclass
class ArchivedSession:
    session_id: str
    fork_seq: int = 0
    lines: int = 0
    last_seq: int = 0
    digest: bytes = b""
    meta: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    decisions: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)  # (id, version) → row
    context: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)  # (key, revision) → row


@dataclass
class VerifyReport:
    sessions: list[dict[str, Any]] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    fetched: str | None = None  # what the fetch of the remote found, and which main was compared

    @property
    def ok(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "sessions": self.sessions, "differences": self.differences, "repaired": self.repaired,
                "fetched": self.fetched}

    def lines(self) -> list[str]:
        total = sum(s["archive"]["messages"] for s in self.sessions)
        fetched = [self.fetched] if self.fetched else []
        if self.ok:
            return [*fetched, *self.repaired, f"archive matches the database: {len(self.sessions)} session(s), {total} line(s)"]
        return [*fetched, *self.repaired, *self.differences, f"{len(self.differences)} difference(s) in {len(self.sessions)} session(s)"]


def verify(db: Database, repo: Path, *, repair: bool = False, fetch: bool = True) -> VerifyReport:
    """Compare the archive at `repo` (any clone: an archiver's repository, a standby's, `git clone` of
    the remote) with the database. A repository with a remote is first fetched (`fetch`): a standby's
    copy is only refreshed when it takes over, and would otherwise show differences that are not
    there; the report says what was fetched and which main was compared. `repair`: re-tag the
    snapshots whose tag holds more lines than the snapshot's seq."""
    if not repo.is_dir():
        raise Invalid(f"{repo} is not an archive repository (no such folder)")
    with source.open_archive(repo) as archive:
        rev, fetched = latest(archive.repo, archive.rev) if fetch else (archive.rev, None)
        report = _verify(db, archive.repo, rev, repair=repair)
    report.fetched = fetched
    return report


def latest(repo: Path, rev: str) -> tuple[str, str | None]:
    """The main to compare and what the fetch found. This copy's `rev` when it is the remote's or
    ahead of it (the active archiver's unpushed work); the remote's main when this copy is behind it,
    or diverged from it (a standby whose last run as writer left commits the remote moved past: the
    remote wins when it takes over, gitrepo.sync_with_remote). Only then are the remote's snapshot
    tags taken too: the active archiver's own tags (one just moved by --repair and not pushed yet)
    are never replaced by the remote's."""
    if not gitrepo.has_remote(repo):
        return rev, None
    url = gitrepo.git(repo, "remote", "get-url", gitrepo.REMOTE, check=False).strip() or gitrepo.REMOTE
    url = re.sub(r"//[^/@]*@", "//", url)  # a password or token in the URL is never shown
    try:
        gitrepo.git(repo, "fetch", "-q", gitrepo.REMOTE,
                    f"+refs/heads/{layout.BRANCH}:refs/remotes/{gitrepo.REMOTE}/{layout.BRANCH}",
                    timeout=FETCH_TIMEOUT)
        remote = gitrepo.git(repo, "rev-parse", "-q", "--verify",
                             f"refs/remotes/{gitrepo.REMOTE}/{layout.BRANCH}", check=False).strip()
        if not remote:
            return rev, f"fetched {url}: it has no {layout.BRANCH} yet; compared this copy"
        if remote == rev:
            return rev, f"fetched {url}: {layout.BRANCH} at {remote[:10]}, the same as this copy"
        ahead, behind = _count(repo, f"{remote}..{rev}"), _count(repo, f"{rev}..{remote}")
        if not behind:
            return rev, (f"fetched {url}: {layout.BRANCH} at {remote[:10]}; this copy is {ahead} commit(s) "
                         "ahead (not pushed yet), compared this copy")
        gitrepo.git(repo, "fetch", "-q", gitrepo.REMOTE, "+refs/tags/snapshot-*:refs/tags/snapshot-*",
                    timeout=FETCH_TIMEOUT)
    except gitrepo.GitError as exc:
        log.warning("archive verify: cannot fetch the remote (%s); verifying the local copy", exc)
        return rev, f"could not fetch {url} ({exc}); compared this copy as it is"
    left = (f", and this copy's {ahead} commit(s) the remote moved past (a standby's earlier run as writer; "
            "the remote wins when it takes over)") if ahead else ""
    return remote, (f"fetched {url}: {layout.BRANCH} at {remote[:10]} with {behind} commit(s) this copy lacked"
                    f"{left}, and its snapshot tags; compared the remote's {layout.BRANCH}")


def _count(repo: Path, span: str) -> int:
    return int(gitrepo.git(repo, "rev-list", "--count", span).strip() or 0)


def _verify(db: Database, repo: Path, rev: str, *, repair: bool) -> VerifyReport:
    archived = read_archive(repo, rev)
    tags = gittags.tags(repo)
    with db.transaction() as conn:
        store = ArchiveStore(conn)
        done = store.done_watermarks()
        ids = sorted(set(archived) | set(done))
        lineage = store.sessions_lineage(ids)
        snapshot_seqs = store.snapshot_seqs()
        digests = store.db_digests({sid: archived[sid].last_seq if sid in archived else 0 for sid in ids})
        db_decisions, db_context = store.memory_rows(sorted(archived))
    report = VerifyReport()
    for sid in ids:
        report.differences.extend(_compare(sid, archived.get(sid), lineage.get(sid), digests.get(sid), done.get(sid)))
        if sid in archived and sid in lineage:
            report.differences.extend(compare_memory(archived[sid], db_decisions.get(sid, []),
                                                     db_context.get(sid, [])))
        if sid in archived:
            a, d = archived[sid], digests.get(sid, (0, 0, b""))
            report.sessions.append({"session_id": sid,
                                    "archive": {"messages": a.lines, "last_seq": a.last_seq, "sha256": a.digest.hex()},
                                    "database": {"messages": d[0], "last_seq": d[1], "sha256": d[2].hex()}})
    if repair:
        report.repaired = repair_tags(repo, snapshot_seqs)
    report.differences.extend(check_tags(repo, snapshot_seqs))
    report.differences.extend(f"{path}: {why}" for path, why in gitrepo.refused_entries(repo, rev))
    for sid, (_, snapshot_ids) in sorted(done.items()):
        missing = [i for i in snapshot_ids if layout.tag_name(i) not in tags]
        if missing:
            report.differences.append(f"{sid}: tag(s) missing for exported snapshot(s) "
                                      + ", ".join(layout.tag_name(i) for i in missing))
    return report


def compare_memory(a: ArchivedSession, decisions: list[dict[str, Any]], context: list[dict[str, Any]]) -> list[str]:
    """Every archived decision version and context revision must be the database's row, unchanged.
    Rows the archive does not hold yet (written after the session's last export) are no difference:
    the next snapshot of the session carries them."""
    out = []
    for kind, archived, rows, key in (("decision", a.decisions, decisions, layout.decision_key),
                                      ("context", a.context, context, layout.context_key)):
        database = {key(row): row for row in rows}
        for k, row in sorted(archived.items()):
            name = f"{kind} {k[0]} {'version' if kind == 'decision' else 'revision'} {k[1]}"
            if k not in database:
                out.append(f"{a.session_id}: {name} is in the archive but not in the database")
            elif database[k] != row:
                changed = sorted(f for f in set(row) | set(database[k]) if row.get(f) != database[k].get(f))
                out.append(f"{a.session_id}: {name} differs from the database ({', '.join(changed)})")
    return out


def repair_tags(repo: Path, snapshot_seqs: dict[int, tuple[str, int]]) -> list[str]:
    """Each snapshot tag whose tree holds lines beyond its snapshot's seq (an earlier version exported
    snapshot N+1's lines under tag N when N was retried after N+1) is pointed at a commit with exactly
    its lines (gittags.exact_commit, the same commit message); the archiver's next push publishes it."""
    repaired = []
    for name, sha, sid, up_to, last in _tag_checks(repo, snapshot_seqs):
        if last is not None and last > up_to:
            message = gitrepo.git(repo, "log", "-1", "--format=%B", sha)
            date = gitrepo.git(repo, "log", "-1", "--format=@%at +0000", sha).strip()
            exact = gittags.exact_commit(repo, sha, sid, up_to, message.rstrip("\n") + "\n", date=date)
            gittags.retag(repo, name, exact, gittags.tag_message(repo, name))
            repaired.append(f"tag {name}: moved from {sha[:10]} (lines up to seq {last}) to {exact[:10]} "
                            f"(up to seq {up_to})")
    return repaired


def check_tags(repo: Path, snapshot_seqs: dict[int, tuple[str, int]]) -> list[str]:
    """Every snapshot tag's tree must hold its session's lines up to the snapshot's seq, no more and no
    fewer (the database's up_to_seq when it has the snapshot, else the tag's own subject)."""
    out = _bad_subjects(repo)
    for name, _, sid, up_to, last in _tag_checks(repo, snapshot_seqs):
        path = layout.session_path(sid)
        if last is None:
            out.append(f"tag {name}: the last line of {path} is not an archive line")
        elif last > up_to:
            out.append(f"tag {name}: its tree holds lines up to seq {last}, beyond the snapshot's seq {up_to} "
                       "(archive verify --repair re-tags it)")
        elif 0 < last < up_to:  # 0: no file in the tree (a snapshot at or before a fork point)
            out.append(f"tag {name}: its tree holds lines up to seq {last}, short of the snapshot's seq {up_to}")
    return out


def _bad_subjects(repo: Path) -> list[str]:
    return [f"tag {name}: its message is not a snapshot subject ({subject!r})"
            for name, (_, subject) in sorted(gittags.tag_subjects(repo).items())
            if (parsed := layout.parse_subject(subject)) is None or layout.tag_name(parsed[0]) != name]


def _tag_checks(repo: Path, snapshot_seqs: dict[int, tuple[str, int]]
                ) -> list[tuple[str, str, str, int, int | None]]:
    """(tag, its commit, session, the snapshot's seq, the last seq in the tag's tree) of each snapshot tag."""
    tagged = gittags.tag_subjects(repo)
    checks: list[tuple[str, str, str, int]] = []
    for name, (sha, subject) in sorted(tagged.items()):
        parsed = layout.parse_subject(subject)
        if parsed is None or layout.tag_name(parsed[0]) != name:
            continue
        snapshot_id, sid, up_to = parsed
        sid, up_to = snapshot_seqs.get(snapshot_id, (sid, up_to))
        checks.append((name, sha, sid, up_to))
    specs = sorted({f"{sha}:{layout.session_path(sid)}" for _, sha, sid, _ in checks})
    blobs = dict(gitrepo.read_blobs(repo, specs))
    return [(name, sha, sid, up_to, _last_seq(blobs[f"{sha}:{layout.session_path(sid)}"]))
            for name, sha, sid, up_to in checks]


def _last_seq(data: bytes | None) -> int | None:
    """The seq of the file's last line; 0 for no file (a snapshot at or before a fork point)."""
    if not data or not data.strip():
        return 0
    try:
        return int(json.loads(data.rstrip(b"\n").rsplit(b"\n", 1)[-1])["seq"])
    except (ValueError, KeyError, TypeError):
        return None


def _compare(sid: str, a: ArchivedSession | None, row: dict[str, Any] | None,
             digest: tuple[int, int, bytes] | None, done: tuple[int, list[int]] | None) -> list[str]:
    if row is None:
        return [f"{sid}: in the archive but not in the database"] if a else []
    if a is None:
        return [f"{sid}: snapshots up to seq {done[0]} are exported but the archive has no file"] if done else []
    out = [f"{sid}: {p}" for p in a.problems]
    if a.meta is None:
        out.append(f"{sid}: {layout.meta_path(sid)} is missing")
    else:
        for key in LINEAGE:
            if a.meta.get(key) != row[key]:
                out.append(f"{sid}: {key} is {a.meta.get(key)!r} in the archive, {row[key]!r} in the database")
    out.extend(compare_lines(sid, a, digest))
    if done and a.last_seq < done[0]:
        out.append(f"{sid}: archive reaches seq {a.last_seq}, but snapshots up to seq {done[0]} are marked exported")
    return out


def compare_lines(sid: str, a: ArchivedSession, digest: tuple[int, int, bytes] | None) -> list[str]:
    """The archive's lines of a session against the database's own rows summed up alike (count, last
    seq, sha256 over the payload hashes in seq order: ArchiveStore.db_digests); also what decides
    whether a month may leave the hot tables (cold.py)."""
    count, last, db_digest = digest or (0, 0, b"")
    if count != a.lines:
        return [f"{sid}: {a.lines} line(s) in the archive, {count} message(s) in the database up to seq {a.last_seq}"]
    if last != (a.last_seq if a.lines else 0):
        return [f"{sid}: last seq {a.last_seq} in the archive, {last} in the database"]
    if not a.problems and db_digest != a.digest:
        return [f"{sid}: content differs from the database (sha256 {a.digest.hex()[:12]} vs {db_digest.hex()[:12]})"]
    return []


def read_archive(repo: Path, rev: str = layout.BRANCH) -> dict[str, ArchivedSession]:
    """Every session's committed files on main (or `rev`), checked line by line."""
    files = gitrepo.list_files(repo, rev=rev)
    sessions: dict[str, ArchivedSession] = {}
    metas = [p for p in files if p.endswith(".meta.json")]
    for path, data in gitrepo.read_files(repo, metas, rev=rev):
        sid = Path(path).name.removesuffix(".meta.json")
        s = sessions.setdefault(sid, ArchivedSession(sid))
        try:
            s.meta = layout.parse_meta(data.decode(), where=path)
            s.fork_seq = s.meta.get("fork_seq") or 0
        except (McpMemoryError, UnicodeDecodeError) as exc:
            s.problems.append(str(exc))
    jsonl = [p for p in files if p.endswith(".jsonl")]
    for path, data in gitrepo.read_files(repo, jsonl, rev=rev):
        sid = Path(path).name.removesuffix(".jsonl")
        if path.startswith(layout.SESSIONS_DIR + "/"):
            check_lines(sessions.setdefault(sid, ArchivedSession(sid)), path, data)
        else:
            _read_memory(sessions.setdefault(sid, ArchivedSession(sid)), path, data)
    return sessions


def _read_memory(s: ArchivedSession, path: str, data: bytes) -> None:
    kind = "decision" if path.startswith(layout.DECISIONS_DIR + "/") else "context"
    held, key = (s.decisions, layout.decision_key) if kind == "decision" else (s.context, layout.context_key)
    for number, raw in enumerate(data.splitlines(), start=1):
        try:
            row = layout.parse_memory_line(raw.decode(), where=f"{path}:{number}", kind=kind)
        except (McpMemoryError, UnicodeDecodeError) as exc:
            s.problems.append(str(exc))
            continue
        if key(row) in held:
            s.problems.append(f"{path}:{number}: {kind} {key(row)[0]} {key(row)[1]} is on an earlier line too")
        held[key(row)] = row


def check_lines(s: ArchivedSession, path: str, data: bytes) -> None:
    running = hashlib.sha256()
    expected = s.fork_seq + 1
    s.last_seq = s.fork_seq
    if data and not data.endswith(b"\n"):
        s.problems.append(f"{path}: the last line is incomplete")
    for number, raw in enumerate(data.splitlines(), start=1):
        try:
            message = layout.parse_line(raw.decode(), where=f"{path}:{number}")
        except (McpMemoryError, UnicodeDecodeError) as exc:
            s.problems.append(str(exc))
            continue
        if message.session_id != s.session_id:
            s.problems.append(f"{path}:{number}: line of session {message.session_id}")
        if message.seq != expected:
            kind = "duplicate" if message.seq < expected else "gap before"
            s.problems.append(f"{path}:{number}: {kind} seq {message.seq} (expected {expected})")
        expected = message.seq + 1
        s.lines += 1
        s.last_seq = max(s.last_seq, message.seq)
        running.update(message.digest)
    s.digest = running.digest()
