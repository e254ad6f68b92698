"""`archive verify`: does the archive hold exactly what the database says it should?

Per session: message count, last seq and a content hash (sha256 over the payload hashes in seq order)
of the archive's committed lines against the database's own rows up to the same seq; plus every line
intact (its content still hashes to its payload_sha256), seqs contiguous and unique, the archive not
behind the snapshots marked done, a tag for each of them, and lineage equal to the database's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Invalid, McpMemoryError
from ..store.archive_store import ArchiveStore
from ..store.db import Database
from . import gitrepo, layout

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


@dataclass
class VerifyReport:
    sessions: list[dict[str, Any]] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "sessions": self.sessions, "differences": self.differences}

    def lines(self) -> list[str]:
        total = sum(s["archive"]["messages"] for s in self.sessions)
        if self.ok:
            return [f"archive matches the database: {len(self.sessions)} session(s), {total} line(s)"]
        return [*self.differences, f"{len(self.differences)} difference(s) in {len(self.sessions)} session(s)"]


def verify(db: Database, repo: Path) -> VerifyReport:
    if not repo.is_dir() or gitrepo.head(repo) is None:
        raise Invalid(f"{repo} is not an archive repository (no commits on {layout.BRANCH})")
    archived = read_archive(repo)
    tags = gitrepo.tags(repo)
    with db.transaction() as conn:
        store = ArchiveStore(conn)
        done = store.done_watermarks()
        ids = sorted(set(archived) | set(done))
        lineage = store.sessions_lineage(ids)
        snapshot_seqs = store.snapshot_seqs()
        digests = store.db_digests({sid: archived[sid].last_seq if sid in archived else 0 for sid in ids})
    report = VerifyReport()
    for sid in ids:
        report.differences.extend(_compare(sid, archived.get(sid), lineage.get(sid), digests.get(sid), done.get(sid)))
        if sid in archived:
            a, d = archived[sid], digests.get(sid, (0, 0, b""))
            report.sessions.append({"session_id": sid,
                                    "archive": {"messages": a.lines, "last_seq": a.last_seq, "sha256": a.digest.hex()},
                                    "database": {"messages": d[0], "last_seq": d[1], "sha256": d[2].hex()}})
    report.differences.extend(check_tags(repo, snapshot_seqs))
    report.differences.extend(f"{path}: {why}" for path, why in gitrepo.refused_entries(repo))
    for sid, (_, snapshot_ids) in sorted(done.items()):
        missing = [i for i in snapshot_ids if layout.tag_name(i) not in tags]
        if missing:
            report.differences.append(f"{sid}: tag(s) missing for exported snapshot(s) "
                                      + ", ".join(layout.tag_name(i) for i in missing))
    return report


def check_tags(repo: Path, snapshot_seqs: dict[int, tuple[str, int]]) -> list[str]:
    """Every snapshot tag's tree must hold its session's lines up to the snapshot's seq, no more and no
    fewer (the database's up_to_seq when it has the snapshot, else the tag's own subject)."""
    tagged = gitrepo.tag_subjects(repo)
    checks: list[tuple[str, str, int]] = []  # (rev:path, tag, up_to_seq); tags may share a commit
    out = []
    for name, (sha, subject) in sorted(tagged.items()):
        parsed = layout.parse_subject(subject)
        if parsed is None or layout.tag_name(parsed[0]) != name:
            out.append(f"tag {name}: its message is not a snapshot subject ({subject!r})")
            continue
        snapshot_id, sid, up_to = parsed
        sid, up_to = snapshot_seqs.get(snapshot_id, (sid, up_to))
        checks.append((f"{sha}:{layout.session_path(sid)}", name, up_to))
    blobs = dict(gitrepo.read_blobs(repo, sorted({spec for spec, _, _ in checks})))
    for spec, name, up_to in checks:
        data = blobs[spec]
        last = _last_seq(data)
        if last is None:
            out.append(f"tag {name}: the last line of {spec.split(':', 1)[1]} is not an archive line")
        elif last > up_to:
            out.append(f"tag {name}: its tree holds lines up to seq {last}, beyond the snapshot's seq {up_to}")
        elif last < up_to and data:
            out.append(f"tag {name}: its tree holds lines up to seq {last}, short of the snapshot's seq {up_to}")
    return out


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
    count, last, db_digest = digest or (0, 0, b"")
    if count != a.lines:
        out.append(f"{sid}: {a.lines} line(s) in the archive, {count} message(s) in the database up to seq {a.last_seq}")
    elif last != (a.last_seq if a.lines else 0):
        out.append(f"{sid}: last seq {a.last_seq} in the archive, {last} in the database")
    elif not a.problems and db_digest != a.digest:
        out.append(f"{sid}: content differs from the database (sha256 {a.digest.hex()[:12]} vs {db_digest.hex()[:12]})")
    if done and a.last_seq < done[0]:
        out.append(f"{sid}: archive reaches seq {a.last_seq}, but snapshots up to seq {done[0]} are marked exported")
    return out


def read_archive(repo: Path) -> dict[str, ArchivedSession]:
    """Every session's committed files on main, checked line by line."""
    files = gitrepo.list_files(repo)
    sessions: dict[str, ArchivedSession] = {}
    metas = [p for p in files if p.endswith(".meta.json")]
    for path, data in gitrepo.read_files(repo, metas):
        sid = Path(path).name.removesuffix(".meta.json")
        s = sessions.setdefault(sid, ArchivedSession(sid))
        try:
            s.meta = layout.parse_meta(data.decode(), where=path)
            s.fork_seq = s.meta.get("fork_seq") or 0
        except (McpMemoryError, UnicodeDecodeError) as exc:
            s.problems.append(str(exc))
    jsonl = [p for p in files if p.endswith(".jsonl")]
    for path, data in gitrepo.read_files(repo, jsonl):
        sid = Path(path).name.removesuffix(".jsonl")
        _check_lines(sessions.setdefault(sid, ArchivedSession(sid)), path, data)
    return sessions


def _check_lines(s: ArchivedSession, path: str, data: bytes) -> None:
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
