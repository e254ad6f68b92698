"""The storage layer: every statement the core runs, over one connection in one transaction.

Only this module (and its siblings in store/) touches psycopg; it returns records, never raw rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ..models import format_time
from ..records import Session, Snapshot
from .sql import q


class AppendRaced(Exception):
    """A concurrent transaction stored one of the batch's append_ids first (see lock_session)."""


@dataclass(frozen=True)
class NewMessage:
    seq: int
    append_id: str
    role: str
    payload_json: str  # canonical JSON text of the payload
    payload_hash: bytes
    created_at: datetime | None


@dataclass(frozen=True)
class Segment:
    """Part of a session's history held by one (possibly ancestor) session: seq in (lower, upper]."""

    session_id: str
    lower: int
    upper: int | None


@dataclass(frozen=True)
class StoredRow:
    session_id: str
    seq: int
    append_id: str
    role: str
    payload: dict[str, Any]
    created_at: datetime


class Store:
    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def _one(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(q(name), params).fetchone()

    def _all(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(q(name), params).fetchall()

    # sessions ---------------------------------------------------------------------------------
    def insert_session(self, **fields: Any) -> Session:
        fields["meta"] = Jsonb(fields["meta"])
        fields.setdefault("parent_session_id", None)
        fields.setdefault("fork_seq", None)
        fields.setdefault("parent_snapshot_id", None)
        return session_record(self._one("insert_session", fields))

    def get_session(self, session_id: str) -> Session | None:
        row = self._one("get_session", {"session_id": session_id})
        return session_record(row) if row else None

    def lock_session(
        self, session_id: str, append_ids: Sequence[str]
    ) -> tuple[str, int, dict[str, tuple[int, bytes]]] | None:
        """Lock the session row; (project_id, last_seq, {stored append_id: (seq, payload_hash)})."""
        rows = self.conn.execute(q("lock_session"), {"session_id": session_id,
                                                     "append_ids": list(append_ids)}).fetchall()
        if not rows:
            return None
        existing = {append_id: (seq, bytes(digest)) for _, _, append_id, seq, digest in rows if append_id}
        return rows[0][0], rows[0][1], existing

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
        return [session_record(row) for row in self._all("list_sessions", params)]

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
        row = self._one("update_session_meta", params)
        return session_record(row) if row else None

    # messages ---------------------------------------------------------------------------------
    def insert_messages(self, session_id: str, project_id: str, rows: Sequence[NewMessage], *, last_seq: int) -> None:
        """Insert the rows and move the session's last_seq (run it inside `writes()`)."""
        if len(rows) == 1:
            row = rows[0]
            self.conn.execute(q("insert_message"), {
                "session_id": session_id, "seq": row.seq, "project_id": project_id,
                "append_id": row.append_id, "role": row.role, "payload": row.payload_json,
                "payload_hash": row.payload_hash, "created_at": row.created_at})
        else:
            self.conn.execute(q("insert_messages"), {
                "session_id": session_id, "project_id": project_id,
                "seqs": [r.seq for r in rows], "append_ids": [r.append_id for r in rows],
                "roles": [r.role for r in rows], "payloads": [r.payload_json for r in rows],
                "hashes": [r.payload_hash for r in rows], "created": [r.created_at for r in rows]})  # arrays go as %b (binary): no per-element quoting in Python
        self.set_last_seq(session_id, last_seq)

    @contextmanager
    def final_writes(self, *, commit: bool) -> Iterator[None]:
        """The transaction's last statements, sent together (pipeline mode: one round trip instead
        of one per statement), with its COMMIT when `commit` (small writes only: a multi-megabyte
        batch followed by COMMIT in one pipeline can stall); a lost append_id race surfaces as
        AppendRaced."""
        try:
            with self.conn.pipeline():
                yield
                if commit:
                    self.conn.commit()
        except psycopg.errors.UniqueViolation as exc:
            raise AppendRaced(exc.diag.message_primary or str(exc)) from exc

    def set_last_seq(self, session_id: str, last_seq: int) -> None:
        self.conn.execute(q("set_last_seq"), {"session_id": session_id, "last_seq": last_seq})

    def lineage(self, session_id: str) -> list[Segment]:
        rows = self.conn.execute(q("lineage"), {"session_id": session_id}).fetchall()
        return [Segment(sid, lower, upper) for sid, lower, upper in rows]

    def read_range(self, segment: Segment, *, after_seq: int, limit: int) -> list[StoredRow]:
        params = {
            "session_id": segment.session_id,
            "after_seq": max(after_seq, segment.lower),
            "upper": segment.upper if segment.upper is not None else 2**62,
            "limit": limit,
        }
        return [StoredRow(*row) for row in self.conn.execute(q("read_range"), params).fetchall()]

    # snapshots --------------------------------------------------------------------------------
    def insert_snapshot(self, session_id: str, commit_msg: str, meta: dict[str, Any]) -> Snapshot | None:
        row = self._one("insert_snapshot", {"session_id": session_id, "commit_msg": commit_msg, "meta": Jsonb(meta)})
        return snapshot_record(row) if row else None

    def insert_export_job(self, snapshot: Snapshot) -> int:
        params = {"snapshot_id": snapshot.snapshot_id, "session_id": snapshot.session_id,
                  "project_id": snapshot.project_id}
        return self.conn.execute(q("insert_export_job"), params).fetchone()[0]

    def notify_export(self, payload: str) -> None:
        self.conn.execute(q("notify_export"), {"payload": payload})

    def list_snapshots(self, session_id: str) -> list[Snapshot]:
        return [snapshot_record(row) for row in self._all("list_snapshots", {"session_id": session_id})]

    def get_snapshot(self, snapshot_id: int) -> Snapshot | None:
        row = self._one("get_snapshot", {"snapshot_id": snapshot_id})
        return snapshot_record(row) if row else None


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
