"""Digests: a per-project, per-day (or per-session) summary made of quotes from what was stored —
decisions with their status, open questions, files and commands touched — each line naming the
messages or decisions it comes from. Nothing is rewritten or replaced: a digest is computed from
the stored rows on every call, so it follows every new message or decision at once (no cache to
invalidate). The caller's token role reads the rows, so row-level security scopes digests too.

Days are UTC days of the messages' created_at (an imported message keeps its agent's time).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

from psycopg.rows import dict_row

from ..digest_results import Digest, DigestLine, DigestSource, digest_uri
from ..errors import Invalid
from ..inputs import MAX_MATCHES, MAX_PROJECT_CHARS
from ..memory_results import Decision
from ..search.snippet import shorten
from ..store.db import Database
from ..store.memory_store import MemoryStore
from . import decisions as decisions_core
from . import sessions as sessions_core
from .digest_extract import Row, conversation_rows, open_questions, touched, touched_lines

LATER_CAP = 2_000  # turns after the day read to see whether its questions were answered
MAX_MESSAGES = 20_000  # read per digest (the oldest first); `truncated` says when a day had more
RECENT_SESSIONS = 50  # a project's most recently written sessions: where its latest days are found
SECTION_CAP = {"decision": 50, "question": 20, "file": 50, "command": 30}
TITLES = {"decision": "Decisions:", "question": "Open questions:", "file": "Files touched:",
          "command": "Commands run:"}
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")

# tool results are read without their content: a digest never quotes them, and they are the bulk
_SLIM = """jsonb_build_object(
    'role', m.role,
    'content', CASE WHEN m.role = 'tool' THEN NULL ELSE m.payload -> 'content' END,
    'tool_calls', m.payload -> 'tool_calls', 'tool_call_id', m.payload -> 'tool_call_id',
    'name', m.payload -> 'name',
    'metadata', jsonb_build_object('scaffold', m.payload -> 'metadata' -> 'scaffold'))"""
DAY_ROWS = f"""
SELECT m.session_id, m.seq, m.role, {_SLIM} AS payload
FROM sessions s JOIN messages m ON m.session_id = s.session_id
WHERE s.project_id = %(project_id)s AND s.updated_at >= %(start)s
  AND m.created_at >= %(start)s AND m.created_at < %(end)s
ORDER BY m.created_at, m.session_id, m.seq
LIMIT %(cap)s"""
SESSION_ROWS = f"""
SELECT m.session_id, m.seq, m.role, {_SLIM} AS payload
FROM messages m WHERE m.session_id = %(session_id)s ORDER BY m.seq LIMIT %(cap)s"""
DAY_DECISIONS = """
SELECT decision_id, session_id, message_seq, created_at, updated_at FROM decisions
WHERE project_id = %(project_id)s
  AND ((created_at >= %(start)s AND created_at < %(end)s) OR (updated_at >= %(start)s AND updated_at < %(end)s)
       OR (session_id = ANY(%(sessions)s) AND message_seq IS NOT NULL))
ORDER BY created_at DESC, decision_id LIMIT %(cap)s"""
# user/assistant turns after a day in the sessions that ended the day with a question
LATER_ROWS = f"""
SELECT m.session_id, m.seq, m.role, {_SLIM} AS payload
FROM messages m
WHERE m.session_id = ANY(%(sessions)s) AND m.created_at >= %(end)s AND m.role IN ('user', 'assistant')
ORDER BY m.session_id, m.seq LIMIT %(cap)s"""
# the UTC days of the last messages of the project's most recently written sessions, newest first
RECENT_DAYS = """
SELECT DISTINCT (last.created_at AT TIME ZONE 'UTC')::date AS day
FROM (SELECT session_id FROM sessions WHERE project_id = %(project_id)s
      ORDER BY updated_at DESC LIMIT %(sessions)s) s
CROSS JOIN LATERAL (SELECT created_at FROM messages m WHERE m.session_id = s.session_id
                    ORDER BY seq DESC LIMIT 1) last
ORDER BY day DESC LIMIT %(days)s"""


def check_day(day: Any) -> date:
    if not isinstance(day, str) or not _DAY.match(day):
        raise Invalid("day must be a date YYYY-MM-DD (a UTC day)")
    try:
        return date.fromisoformat(day)
    except ValueError:
        raise Invalid(f"day {day} is not a calendar date") from None


def get(db: Database, project_id: Any, *, day: Any = None, session_id: Any = None) -> Digest:
    """The digest of one UTC day of the project (default: its latest day with messages) or of one
    session of it."""
    if not isinstance(project_id, str) or not project_id or len(project_id) > MAX_PROJECT_CHARS:
        raise Invalid(f"project_id must be a non-empty string of at most {MAX_PROJECT_CHARS} characters")
    if day is not None and session_id is not None:
        raise Invalid("day and session_id exclude each other: give one (or neither for the latest day)")
    if session_id is not None:
        return _session_digest(db, project_id, session_id)
    if day is None:
        days = recent_days(db, project_id, 1)
        if not days:
            return _empty(project_id, None)
        day = days[0]
    return _day_digest(db, project_id, check_day(day))


def recent_days(db: Database, project_id: str, count: int) -> list[str]:
    """The project's latest days with messages (newest first), at most `count`."""
    with db.transaction() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(RECENT_DAYS, {"project_id": project_id, "sessions": RECENT_SESSIONS,
                                         "days": count}, prepare=False).fetchall()
    return [row["day"].isoformat() for row in rows]


def _day_digest(db: Database, project_id: str, day: date) -> Digest:
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    end = start + timedelta(days=1)
    with db.transaction() as conn, conn.cursor(row_factory=dict_row) as cur:
        raw = cur.execute(DAY_ROWS, {"project_id": project_id, "start": start, "end": end, "cap": MAX_MESSAGES + 1},
                          prepare=False).fetchall()
    rows = [Row(r["session_id"], r["seq"], r["role"], r["payload"]) for r in raw[:MAX_MESSAGES]]
    found = _day_decisions(db, project_id, rows, start, end)
    return _build(project_id, rows, found, day=day.isoformat(), truncated=len(raw) > MAX_MESSAGES,
                  later=_later_turns(db, rows, end))


def _day_decisions(db: Database, project_id: str, rows: list[Row], start: datetime, end: datetime) -> list[Decision]:
    """The decisions recorded or changed (status, supersession) that day, and those whose message is
    among the day's messages (an imported history's decisions are recorded later than their
    messages), newest first."""
    keys = {(r.session_id, r.seq) for r in rows}
    params = {"project_id": project_id, "start": start, "end": end, "sessions": sorted({r.session_id for r in rows}),
              "cap": MAX_MATCHES * 4}
    with db.transaction() as conn, conn.cursor(row_factory=dict_row) as cur:
        candidates = cur.execute(DAY_DECISIONS, params, prepare=False).fetchall()
        chosen = [c["decision_id"] for c in candidates
                  if start <= c["created_at"] < end or start <= c["updated_at"] < end
                  or (c["session_id"], c["message_seq"]) in keys][:MAX_MATCHES]
        store = MemoryStore(conn)
        found = [store.get_decision(decision_id) for decision_id in chosen]
    return [d for d in found if d is not None]


def _later_turns(db: Database, rows: list[Row], end: datetime) -> list[Row]:
    """The user/assistant turns after the day in the sessions with a question open at the day's end:
    they tell whether it was answered later."""
    asking = sorted({line.sources[0].session_id for line in open_questions(conversation_rows(rows))})
    if not asking:
        return []
    with db.transaction() as conn, conn.cursor(row_factory=dict_row) as cur:
        raw = cur.execute(LATER_ROWS, {"sessions": asking, "end": end, "cap": LATER_CAP}, prepare=False).fetchall()
    return [Row(r["session_id"], r["seq"], r["role"], r["payload"]) for r in raw]


def _session_digest(db: Database, project_id: str, session_id: Any) -> Digest:
    if not isinstance(session_id, str) or not session_id:
        raise Invalid("session_id must be a non-empty string")
    session = sessions_core.get(db, session_id)  # [not_found] also for a session the token cannot read
    if session.project_id != project_id:
        raise Invalid(f"session_id {session_id} belongs to another project than {project_id}")
    with db.transaction() as conn, conn.cursor(row_factory=dict_row) as cur:
        raw = cur.execute(SESSION_ROWS, {"session_id": session_id, "cap": MAX_MESSAGES + 1},
                          prepare=False).fetchall()
    found = decisions_core.search(db, None, project_id=project_id, session_id=session_id, limit=MAX_MATCHES)
    rows = [Row(r["session_id"], r["seq"], r["role"], r["payload"]) for r in raw[:MAX_MESSAGES]]
    return _build(project_id, rows, found, session_id=session_id, truncated=len(raw) > MAX_MESSAGES)


def _build(project_id: str, rows: list[Row], found: list[Decision], *, day: str | None = None,
           session_id: str | None = None, truncated: bool = False, later: list[Row] | None = None) -> Digest:
    kept = conversation_rows(rows)
    files, commands = touched(kept)
    lines = ([_decision_line(d) for d in reversed(found)] + open_questions(kept, conversation_rows(later or []))
             + touched_lines("file", files) + touched_lines("command", commands))
    sessions = sorted({r.session_id for r in rows} | {d.session_id for d in found})
    digest = Digest(project_id=project_id, day=day, session_id=session_id, text="", lines=lines,
                    sessions=sessions, messages=len(rows), truncated=truncated,
                    uri=digest_uri(project_id, day, session_id))
    digest.text = render(digest)
    return digest


def _empty(project_id: str, day: str | None) -> Digest:
    return Digest(project_id=project_id, day=day, text="", lines=[], sessions=[], messages=0, uri=digest_uri(project_id))


def _decision_line(d: Decision) -> DigestLine:
    where = f"{d.session_id}#{d.message_seq}" if d.message_seq else d.session_id
    replaced = f" (replaced by {d.superseded_by})" if d.superseded_by else ""
    text = f"[{d.status}] {d.decision_type}: {shorten(d.summary, 200)}{replaced} ({d.decision_id}; {where})"
    return DigestLine(kind="decision", text=text, status=d.status,
                      sources=[DigestSource(session_id=d.session_id, seq=d.message_seq, decision_id=d.decision_id)])


def render(digest: Digest, *, cap: dict[str, int] | None = None) -> str:
    """The prompt-ready block: a heading, then each section's lines (at most `cap` per section)."""
    if not digest.lines:
        return ""
    cap = cap or SECTION_CAP
    scope = f"session {digest.session_id}" if digest.session_id else f"{digest.day} (UTC)"
    lines = [f"Digest of project {digest.project_id}, {scope}: {digest.messages} stored messages in "
             f"{len(digest.sessions)} session(s). Quotes from stored history, each with its source "
             "(session#seq, decision id); read_session(session_id, after_seq=seq-1) shows the context."]
    for kind, title in TITLES.items():
        chosen = [line for line in digest.lines if line.kind == kind]
        if chosen:
            lines.append(title)
            lines.extend(f"- {line.text}" for line in chosen[: cap[kind]])
            if len(chosen) > cap[kind]:
                lines.append(f"- … {len(chosen) - cap[kind]} more (see lines)")
    return "\n".join(lines)
