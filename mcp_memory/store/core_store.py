"""The storage layer: every statement the core runs, over one connection in one transaction.

Only this module (and its siblings in store/) touches psycopg; it returns records, never raw rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..errors import Retired
from ..results import Session, Snapshot
from ..schema import format_time
from .filters import composed, conditions
from .sql import Statements, first_row, q, scalar

COPY_FROM = 64  # batches of at least this many messages are stored with COPY where it is allowed


COPY_TYPES = ["text", "int8", "text", "text", "text", "jsonb", "bytea", "timestamptz", "date"]


def _as_is(text: str) -> str:
    """The payload is already canonical JSON text: jsonb gets it unchanged."""
    return text


def copy_allowed(conn: psycopg.Connection) -> bool:
    """COPY is 2× faster than the append function for a big batch, but only an owner may write
    tables directly (row-level security, and the token roles' missing INSERT right, apply to
    everyone else). Asked per batch: a pooled connection may change role per transaction."""
    return not scalar(conn, "SELECT row_security_active('messages')", what="row_security_active")


class AppendRaced(Exception):
    """A concurrent transaction stored one of a COPY batch's append_ids first (see lock_session)."""


@dataclass(frozen=True)
class NewMessage:
    seq: int
    append_id: str
    role: str
    payload_json: str  # canonical JSON text of the payload
    payload_hash: bytes
    created_at: datetime | None


@dataclass(frozen=True)
class Locked:
    project_id: str
    last_seq: int
    now: datetime
    existing: dict[str, tuple[int, bytes]]  # stored append_id → (seq, payload hash)
    part_month: date  # the session's month: the partition its rows go to (migration 0021)
    retired: bool  # that month has left the hot tables


@dataclass(frozen=True)
class Segment:
    """Part of a session's history held by one (possibly ancestor) session: seq in (lower, upper]."""

    session_id: str
    lower: int
    upper: int | None
    part_month: date  # the month partition holding this session's rows (migration 0021)


@dataclass(frozen=True)
class StoredRow:
    session_id: str
    seq: int
    append_id: str
    role: str
    payload: dict[str, Any]
    created_at: datetime


class Store(Statements):
    # sessions ---------------------------------------------------------------------------------
    def insert_session(self, **fields: Any) -> Session:
        fields["meta"] = Jsonb(fields["meta"])
        return session_record(first_row(self._one("session_insert", fields), "mm_create_session"))

    def fork_session(self, *, snapshot_id: int, session_id: str, agent_source: str | None, title: str | None,
                     meta: dict[str, Any]) -> Session:
        return session_record(first_row(self._one("session_fork", {
            "snapshot_id": snapshot_id, "session_id": session_id, "agent_source": agent_source, "title": title,
            "meta": Jsonb(meta)}), "mm_fork"))

    def get_session(self, session_id: str) -> Session | None:
        row = self._one("session_get", {"session_id": session_id})
        return session_record(row) if row else None

    def append_many(self, session_id: str, rows: Sequence[NewMessage]) -> list[tuple[int, bool]]:
        """Store messages through the database's append function (seq, duplicate and hash checks
        happen there, migration 0007): (seq, duplicate) per message. A lone message runs as its own
        autocommit statement (no BEGIN/COMMIT round trip); call it on an idle connection then."""
        params = {"session_id": session_id, "append_ids": [r.append_id for r in rows],
                  "roles": [r.role for r in rows], "payloads": [r.payload_json for r in rows],
                  "hashes": [r.payload_hash for r in rows], "created": [r.created_at for r in rows]}
        single = len(rows) == 1 and not self.conn.info.transaction_status
        if single:
            self.conn.autocommit = True
        try:
            return [(seq, duplicate) for seq, duplicate in self.conn.execute(q("messages_append"), params).fetchall()]
        finally:
            if single:
                self.conn.autocommit = False

    def lock_session(
        self, session_id: str, append_ids: Sequence[str]
    ) -> Locked | None:
        """Lock the session row: its project, last_seq, the transaction's time and the batch's
        append_ids that are already stored, with their seq and payload hash."""
        rows = self.conn.execute(q("session_lock"), {"session_id": session_id,
                                                     "append_ids": list(append_ids)}).fetchall()
        if not rows:
            return None
        existing = {row[3]: (row[4], bytes(row[5])) for row in rows if row[3]}
        return Locked(rows[0][0], rows[0][1], rows[0][2], existing, rows[0][6], rows[0][7])

    def list_sessions(
        self, *, project_id: str | None, agent_source: str | None, cursor: tuple[datetime, str] | None, limit: int
    ) -> list[Session]:
        params = {
            "project_id": project_id,
            "agent_source": agent_source,
            "cursor_at": cursor[0] if cursor else None,
            "cursor_id": cursor[1] if cursor else None,
            "limit": limit,
        }
        query = composed("session_list", filters=conditions([
            (project_id is not None, "project_id = %(project_id)s"),
            (agent_source is not None, "agent_source = %(agent_source)s"),
            (cursor is not None, "(created_at, session_id) < (%(cursor_at)s, %(cursor_id)s)"),
        ]))
        return [session_record(row) for row in self._rows(query, params)]

    def update_session_meta(
        self, session_id: str, *, set_: dict[str, Any], remove: list[str], columns: dict[str, Any]
    ) -> Session | None:
        params = {
            "session_id": session_id,
            "set": Jsonb(set_),
            "remove": remove,
            "title_given": "title" in columns,
            "title": columns.get("title"),
            "agent_given": "agent_source" in columns,
            "agent_source": columns.get("agent_source"),
        }
        row = self._one("session_update_meta", params)
        return session_record(row) if row else None

    # messages ---------------------------------------------------------------------------------
    def copy_messages(self, session_id: str, project_id: str, rows: Sequence[NewMessage], *, last_seq: int,
                      now: datetime, part_month: date) -> None:
        """An owner's big batch: COPY the rows and move the session's last_seq (run it after
        `lock_session`, in the same transaction). `now`: the transaction's time, for rows without a
        created_at of their own."""
        try:
            with self.conn.cursor() as cur, cur.copy(q("messages_copy")) as copy:
                copy.set_types(COPY_TYPES)
                for r in rows:
                    copy.write_row((session_id, r.seq, project_id, r.append_id, r.role,
                                    Jsonb(r.payload_json, dumps=_as_is), r.payload_hash, r.created_at or now, part_month))
        except psycopg.errors.UniqueViolation as exc:
            raise AppendRaced(exc.diag.message_primary or str(exc)) from exc
        self.set_last_seq(session_id, last_seq)

    def set_last_seq(self, session_id: str, last_seq: int) -> None:
        self.conn.execute(q("session_set_last_seq"), {"session_id": session_id, "last_seq": last_seq})

    def lineage(self, session_id: str) -> list[Segment]:
        """The session's history, newest holder first; Retired when a part of it is in a month that
        has left the hot tables (mcp-memory db partitions --retire)."""
        rows = self.conn.execute(q("session_lineage"), {"session_id": session_id}).fetchall()
        for sid, _, _, month, retired in rows:
            if retired:
                raise Retired(retired_message(session_id, sid, month))
        return [Segment(sid, lower, upper, month) for sid, lower, upper, month, _ in rows]

    def read_range(self, segment: Segment, *, after_seq: int, limit: int) -> list[StoredRow]:
        params = {
            "session_id": segment.session_id,
            "after_seq": max(after_seq, segment.lower),
            "upper": segment.upper if segment.upper is not None else 2**62,
            "part_month": segment.part_month,
            "limit": limit,
        }
        return [StoredRow(*row) for row in self.conn.execute(q("messages_read_range"), params).fetchall()]

    # snapshots --------------------------------------------------------------------------------
    def insert_snapshot(self, session_id: str, commit_msg: str, meta: dict[str, Any]) -> Snapshot:
        """The snapshot, its export job and the archiver's wake-up NOTIFY (one database call)."""
        row = self._one("snapshot_insert", {"session_id": session_id, "commit_msg": commit_msg, "meta": Jsonb(meta)})
        return snapshot_record(first_row(row, "mm_snapshot"))

    def list_snapshots(self, session_id: str) -> list[Snapshot]:
        return [snapshot_record(row) for row in self._all("snapshot_list", {"session_id": session_id})]

    def get_snapshot(self, snapshot_id: int) -> Snapshot | None:
        row = self._one("snapshot_get", {"snapshot_id": snapshot_id})
        return snapshot_record(row) if row else None


def retired_message(session_id: str, holder: str, month: date) -> str:
    """Why a session's history cannot be read: the month holding it (its own, or an ancestor's) retired."""
    whose = "its" if holder == session_id else f"its ancestor {holder}'s"
    return (f"session {session_id}: {whose} messages are in month {month:%Y-%m}, which has retired from the hot "
            "tables (mcp-memory db partitions --retire); restore the session from the archive to read it")


def session_record(row: dict[str, Any]) -> Session:
    return Session(
        session_id=row["session_id"],
        project_id=row["project_id"],
        agent_source=row["agent_source"],
        title=row["title"],
        meta=row["meta"],
        last_seq=row["last_seq"],
        parent_session_id=row["parent_session_id"],
        fork_seq=row["fork_seq"],
        parent_snapshot_id=row["parent_snapshot_id"],
        created_at=format_time(row["created_at"]),
        updated_at=format_time(row["updated_at"]),
    )


def snapshot_record(row: dict[str, Any]) -> Snapshot:
    return Snapshot(
        snapshot_id=row["snapshot_id"],
        session_id=row["session_id"],
        project_id=row["project_id"],
        up_to_seq=row["up_to_seq"],
        commit_msg=row["commit_msg"],
        created_at=format_time(row["created_at"]),
    )
