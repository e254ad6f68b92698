"""The archive's file and commit formats (README, Git archive and restore): one place that writes and parses them.

Lines: one neutral message per line — `session_id`, `seq`, `append_id`, the stored payload fields,
`created_at`, `payload_sha256` (the database's payload_hash) and `written_by` (the token or role the
database recorded as the author; lines written before it was carried have none). The hash lets restore tell whether
`created_at` was part of the client's payload (it is always on the line) and lets verify and restore
detect an edited line.

Commits: subject `snapshot <id>: <session_id> up to seq <n>`, then the snapshot's commit_msg, then a
last line `mcp-memory-snapshot: {json}` that restore parses (commit_msg and created_at exactly).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from ..core.messages import payload_digest
from ..errors import Invalid
from ..schema import format_time

SESSIONS_DIR = "sessions"
DECISIONS_DIR = "decisions"
CONTEXT_DIR = "context"
BRANCH = "main"
TRAILER = "mcp-memory-snapshot: "
SERVER_FIELDS = ("session_id", "seq", "append_id", "payload_sha256", "written_by")
AUTHOR_MAX = 200  # written_by is a role or token name (63 bytes in PostgreSQL); generous, still bounded
_SUBJECT = re.compile(r"^snapshot (\d+): (\S+) up to seq (\d+)$")
# The times every reader can show (a datetime ends with year 9999); the database holds the same range
# (migration 0031), so a crafted archive is refused here, by file and line, not by a failing list later.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
TIME_RULE = "must be an RFC 3339 time with a zone, from 1970-01-01 to 9999-12-31 (UTC)"

README = """\
# mcp-memory archive

This repository is the durable, append-only copy of the sessions that AI agents stored in
mcp-memory (PostgreSQL stays the runtime truth). It is written by one archiver at a time
(`mcp-memory archive --daemon`); do not commit to it by hand.

## Layout

- `sessions/<session_id>.jsonl` — one neutral message (schema_version 1) per line, in `seq` order,
  with `session_id`, `seq`, `append_id`, `created_at`, `payload_sha256` and `written_by` (the
  token that wrote it, as the database recorded it; restore keeps it). Lines are only ever
  appended. A fork's file holds only its own messages; its history before `fork_seq` is in the
  parent's file.
- `sessions/<session_id>.meta.json` — the session's project, agent, title, meta and lineage
  (`parent_session_id`, `fork_seq`, `parent_snapshot_id`).
- `decisions/<session_id>.jsonl` — every version of the decisions recorded in the session, one line
  per version as it was written (status, supersedes links, visibility, author); appended only.
- `context/<session_id>.jsonl` — every revision of the session's context keys; appended only.
- One commit per snapshot, subject `snapshot <id>: <session_id> up to seq <n>`, whose body holds
  the snapshot's message and time; an annotated tag `snapshot-<id>` marks it.

## Restore

    git clone <remote> mcp-archive
    mcp-memory --dsn postgresql://…/empty_db restore --from-archive mcp-archive

`--from-archive` also takes the remote's URL or a bare repository (cloned to a temporary folder),
and a clone without a local `main` (a remote whose HEAD names master) is read from `origin/main`.

Sessions, messages (same append_ids and payloads), snapshots (same ids), fork lineage, decisions
(every version) and context revisions come back. Snapshots are made automatically too (the
archiver's automatic snapshot policy), so unsnapshotted work reaches this repository.
`mcp-memory archive verify --repo PATH` compares an archive with a database.
"""


@dataclass(frozen=True)
class SnapshotInfo:
    """What a snapshot commit records: enough for restore to rebuild the snapshots row."""

    snapshot_id: int
    session_id: str
    project_id: str
    up_to_seq: int
    commit_msg: str
    created_at: str
    created_by: str | None = None
    meta: dict[str, Any] | None = None


# Every path the archiver writes, and so every path it accepts in a tree it reads back from the remote:
# anything else (a symbolic link, a submodule, a file elsewhere) came from someone else and is refused.
ARCHIVE_PATHS = (re.compile(r"README\.md"),
                 re.compile(rf"{SESSIONS_DIR}/[A-Za-z0-9][A-Za-z0-9_-]*\.(?:jsonl|meta\.json)"),
                 re.compile(rf"(?:{DECISIONS_DIR}|{CONTEXT_DIR})/[A-Za-z0-9][A-Za-z0-9_-]*\.jsonl"))
REGULAR_MODES = ("100644", "100755")


def is_archive_path(path: str) -> bool:
    return any(pattern.fullmatch(path) for pattern in ARCHIVE_PATHS)


def refused_entry(mode: str, path: str) -> str | None:
    """Why a tree entry (git mode, path) may not be in an archive, or None when it may."""
    if mode == "120000":
        return "a symbolic link (mode 120000); refused, never followed"
    if mode == "160000":
        return "a submodule (mode 160000); refused"
    if mode not in REGULAR_MODES:
        return f"not a regular file (mode {mode}); refused"
    if not is_archive_path(path):
        return ("not an archive path (only README.md, sessions/<id>.jsonl or .meta.json, decisions/<id>.jsonl and "
                "context/<id>.jsonl); refused")
    return None


def session_path(session_id: str) -> str:
    return f"{SESSIONS_DIR}/{session_id}.jsonl"


def meta_path(session_id: str) -> str:
    return f"{SESSIONS_DIR}/{session_id}.meta.json"


def decisions_path(session_id: str) -> str:
    return f"{DECISIONS_DIR}/{session_id}.jsonl"


def context_path(session_id: str) -> str:
    return f"{CONTEXT_DIR}/{session_id}.jsonl"


def session_paths(session_id: str) -> list[str]:
    """Every file the archive keeps for one session (a snapshot commit writes these)."""
    return [session_path(session_id), meta_path(session_id), decisions_path(session_id), context_path(session_id)]


def tag_name(snapshot_id: int) -> str:
    return f"snapshot-{snapshot_id}"


def subject(snapshot_id: int, session_id: str, up_to_seq: int) -> str:
    return f"snapshot {snapshot_id}: {session_id} up to seq {up_to_seq}"


def parse_subject(text: str) -> tuple[int, str, int] | None:
    """(snapshot_id, session_id, up_to_seq) from a snapshot commit's or tag's subject line."""
    found = _SUBJECT.match(text.strip())
    return (int(found[1]), found[2], int(found[3])) if found else None


def commit_message(info: SnapshotInfo) -> str:
    record = {"snapshot_id": info.snapshot_id, "session_id": info.session_id, "project_id": info.project_id,
              "up_to_seq": info.up_to_seq, "commit_msg": info.commit_msg, "created_at": info.created_at,
              "created_by": info.created_by, "meta": info.meta or {}}
    body = info.commit_msg.strip("\n")
    parts = [subject(info.snapshot_id, info.session_id, info.up_to_seq), body, f"created_at: {info.created_at}",
             TRAILER + json.dumps(record, ensure_ascii=False, sort_keys=True)]
    return "\n\n".join(p for p in parts if p) + "\n"


def parse_commit_message(message: str) -> SnapshotInfo | None:
    """The snapshot recorded in a commit message, or None for other commits (the README commit)."""
    lines = message.rstrip("\n").split("\n")
    if not _SUBJECT.match(lines[0]) or not lines[-1].startswith(TRAILER):
        return None
    record = json.loads(lines[-1][len(TRAILER):])
    return SnapshotInfo(**{f.name: record.get(f.name) for f in fields(SnapshotInfo) if f.name in record})


def message_line(*, session_id: str, seq: int, append_id: str, payload: dict[str, Any], created_at: datetime,
                 payload_hash: bytes, written_by: str | None = None) -> str:
    record = {"session_id": session_id, "seq": seq, "append_id": append_id, **payload,
              "created_at": format_time(created_at), "payload_sha256": payload_hash.hex()}
    if written_by is not None:  # after the payload: a payload key of that name never stands in for the author
        record["written_by"] = written_by
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


@dataclass(frozen=True)
class ArchivedMessage:
    session_id: str
    seq: int
    append_id: str
    role: str
    payload: dict[str, Any]
    created_at: datetime
    digest: bytes  # recomputed with payload_digest; equals the recorded payload_sha256
    written_by: str | None = None  # None: a line from before the archive carried the author


def parse_line(line: str, *, where: str) -> ArchivedMessage:
    """One archive line back to the stored row. Raises Invalid when the line was edited (its content no
    longer hashes to its payload_sha256), naming `where` (file:line)."""
    try:
        record = json.loads(line)
        recorded = bytes.fromhex(record["payload_sha256"])
        session_id, seq, append_id = record["session_id"], int(record["seq"]), record["append_id"]
        created_at = datetime.fromisoformat(record["created_at"]) if time_problem(record["created_at"]) is None \
            else None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Invalid(f"{where}: not an archive line ({exc})") from None
    if created_at is None:
        raise Invalid(f"{where}: {time_problem(record['created_at'])}")
    written_by = _author(record.get("written_by"), where)
    payload = {k: v for k, v in record.items() if k not in SERVER_FIELDS}
    if payload_digest(payload) != recorded:
        payload.pop("created_at", None)  # the client sent no created_at: it is the server's time
        if payload_digest(payload) != recorded:
            raise Invalid(f"{where}: content does not match its payload_sha256 (the line was edited)")
    return ArchivedMessage(session_id, seq, append_id, str(payload.get("role")), payload, created_at, recorded,
                           written_by)


def _author(value: Any, where: str) -> str | None:
    """The line's written_by: absent (an older archive), or the name of a role or token."""
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= AUTHOR_MAX or "\x00" in value:
        raise Invalid(f"{where}: written_by must be a string of 1 to {AUTHOR_MAX} characters without NUL")
    return value


def meta_document(session: dict[str, Any]) -> str:
    """sessions/<id>.meta.json: stable content (no last_seq/updated_at), so it changes only with the meta."""
    doc = {key: session.get(key) for key in ("session_id", "project_id", "agent_source", "title", "meta",
                                             "parent_session_id", "fork_seq", "parent_snapshot_id", "created_by")}
    doc["created_at"] = format_time(session["created_at"]) if isinstance(session["created_at"], datetime) \
        else session["created_at"]
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


def parse_meta(text: str, *, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise Invalid(f"{where}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not str(doc.get("session_id", "")).startswith("ses_"):
        raise Invalid(f"{where}: not a session meta document")
    return doc


# decisions/<id>.jsonl and context/<id>.jsonl: one line per decision version / context revision, as
# the database row was (the decision's search vector left out: restore computes it again). Lines are
# only appended; a line is identified by its key, so an export appends exactly the missing ones.
DECISION_ID = re.compile(r"^dec_[0-9a-f]{32}$")


def memory_line(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def decision_key(row: dict[str, Any]) -> tuple[str, int]:
    return str(row.get("decision_id")), int(row.get("version") or 0)


def context_key(row: dict[str, Any]) -> tuple[str, int]:
    return str(row.get("key")), int(row.get("revision") or 0)


def parse_memory_line(line: str, *, where: str, kind: str) -> dict[str, Any]:
    """A decisions (`kind` "decision") or context ("context") line back to its row; Invalid naming
    `where` when it is not one."""
    try:
        row = json.loads(line)
    except ValueError as exc:
        raise Invalid(f"{where}: not JSON ({exc})") from None
    if not isinstance(row, dict):
        raise Invalid(f"{where}: not a {kind} line (a JSON object)")
    number = row.get("version" if kind == "decision" else "revision")
    if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number < 2**31:
        raise Invalid(f"{where}: {'version' if kind == 'decision' else 'revision'} must be a positive integer")
    if kind == "decision" and not DECISION_ID.match(str(row.get("decision_id"))):
        raise Invalid(f"{where}: decision_id must be dec_ and 32 hex digits")
    if kind == "context" and not isinstance(row.get("key"), str):
        raise Invalid(f"{where}: key must be a string")
    for name in ("created_at", "updated_at"):
        if row.get(name) is not None and (why := time_problem(row[name], name=name)):
            raise Invalid(f"{where}: {why}")
    return row


def time_problem(value: Any, *, name: str = "created_at") -> str | None:
    """Why `value` is not a time every reader can show (`name` and the rule), None when it is one."""
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
        fits = moment is not None and moment.tzinfo is not None and moment.astimezone(UTC) >= EARLIEST
    except (ValueError, OverflowError):  # year 99999, or a zone that moves it past year 1 or 9999
        fits = False
    return None if fits else f"{name} {shown} {TIME_RULE}"
