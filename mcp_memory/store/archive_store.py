"""Storage for the git archiver: the export queue, the leader lock, the wake-up listener, and the
reads and writes of export, verify and restore. All its SQL is in queries/archive.sql."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..errors import Invalid, McpMemoryError, Unavailable
from .db import Database, through_pooler, translate_errors
from .sql import Statements, q, scalar

log = logging.getLogger(__name__)

LEADER_LEASE_SECONDS = 600.0  # a leader whose backend lives but renews nothing for this long is replaced
CHANNEL = "mcp_memory_export"


@dataclass(frozen=True)
class ClaimedJob:
    job_id: int
    snapshot_id: int
    session_id: str
    attempts: int


@dataclass(frozen=True)
class ExportRow:
    seq: int
    append_id: str
    payload: dict[str, Any]
    payload_hash: bytes
    created_at: datetime
    written_by: str


@dataclass(frozen=True)
class RestoredMessage:
    session_id: str
    seq: int
    project_id: str
    append_id: str
    role: str
    payload: dict[str, Any]
    payload_hash: bytes
    created_at: datetime
    written_by: str | None = None  # None: the owner restoring stands in (an older archive)


class ArchiveStore(Statements):
    """The archiver's statements over one connection (inside the caller's transaction)."""

    # queue ------------------------------------------------------------------------------------
    def claim(self, *, worker: str, lease: float, limit: int, due_before: datetime | None = None) -> list[ClaimedJob]:
        params = {"worker": worker, "lease": lease, "limit": limit, "due_before": due_before}
        rows = self._all("archive_claim_jobs", params)
        return sorted((ClaimedJob(**row) for row in rows), key=lambda job: job.snapshot_id)

    def now(self) -> datetime:
        """The server's clock (never compare the client's clock with run_after)."""
        value: datetime = scalar(self.conn, q("archive_now"), what="archive_now")
        return value

    def heartbeat(self, *, worker: str, lease: float) -> int:
        return self._scalar("archive_heartbeat", {"worker": worker, "lease": lease})

    def release_running(self) -> int:
        return self._scalar("archive_release_running")

    def unclaim(self, job_ids: list[int]) -> int:
        """Claimed jobs back to pending, no attempt counted (they wait for an earlier snapshot)."""
        return self._scalar("archive_unclaim", {"job_ids": job_ids})

    def mark_done(self, job_ids: list[int], commits: list[str]) -> int:
        """The jobs are done; `commits[i]` is the archive commit of `job_ids[i]`."""
        return self._scalar("archive_mark_done", {"job_ids": job_ids, "commits": commits})

    def _scalar(self, name: str, params: dict[str, Any] | None = None) -> int:
        row = self.conn.execute(q(name), params or {}).fetchone()
        return int(row[0] or 0) if row else 0

    def mark_attempt_failed(self, job_id: int, *, error: str, give_up: bool, delay: float) -> str | None:
        row = self._one("archive_mark_attempt_failed",
                        {"job_id": job_id, "error": error, "give_up": give_up, "delay": delay})
        return row["status"] if row else None

    def next_due(self) -> float | None:
        """Seconds until the next pending job is due (negative: already due), None when none is pending."""
        value = scalar(self.conn, q("archive_next_due"), what="archive_next_due")
        return None if value is None else float(value)

    def auto_snapshot(self, *, idle_seconds: float | None, every_messages: int | None,
                      limit: int) -> list[dict[str, Any]]:
        """The automatic snapshot policy (lease holder only): the snapshots it made."""
        return self._all("archive_auto_snapshot", {"idle_seconds": idle_seconds, "every_messages": every_messages,
                                                   "limit": limit})

    def get_job(self, job_id: int) -> dict[str, Any] | None:
        return self._one("archive_get_job", {"job_id": job_id})

    def requeue(self, job_id: int | None) -> list[int]:
        rows = self.conn.execute(q("archive_requeue"), {"job_id": job_id}).fetchall()
        return sorted(row[0] for row in rows)

    def snapshot_floor(self, top: int) -> int | None:
        """Move the snapshot ids past `top` (the archive's highest tag); the new floor, or None when
        they already were past it."""
        value = scalar(self.conn, q("archive_snapshot_floor"), {"top": top}, what="archive_snapshot_floor")
        return None if value is None else int(value)

    def renumber_snapshot(self, snapshot_id: int, top: int) -> int:
        """A snapshot whose id the archive holds for another: its new id (past `top`), job pending again."""
        return int(scalar(self.conn, q("archive_renumber_snapshot"), {"snapshot_id": snapshot_id, "top": top},
                          what="archive_renumber_snapshot"))

    def notify(self, payload: str) -> None:
        self.conn.execute(q("archive_notify"), {"payload": payload})

    # status -----------------------------------------------------------------------------------
    def archivers(self) -> list[dict[str, Any]]:
        """The leader (if any) first, then the standbys seen in the last day."""
        return self._all("archive_nodes")

    def lock_holder(self) -> dict[str, Any] | None:
        return next((row for row in self.archivers() if row["leader"] and row["alive"]), None)

    def status_counts(self) -> dict[str, int]:
        return {row["status"]: row["jobs"] for row in self._all("archive_status_counts")}

    def oldest_pending(self) -> dict[str, Any] | None:
        return self._one("archive_oldest_pending")

    def metrics(self) -> dict[str, Any]:
        """The numbers of /metrics and of status's backlog (mm_archive_metrics)."""
        return self._one("archive_metrics") or {}

    def failed_jobs(self, limit: int = 100) -> list[dict[str, Any]]:
        return self._all("archive_failed_jobs", {"limit": limit})

    # export -----------------------------------------------------------------------------------
    def export_snapshot(self, snapshot_id: int) -> dict[str, Any] | None:
        return self._one("archive_export_snapshot", {"snapshot_id": snapshot_id})

    def export_page(self, session_id: str, *, after_seq: int, up_to_seq: int, limit: int,
                    max_bytes: int) -> list[ExportRow]:
        """The session's own rows after `after_seq`, up to `up_to_seq`, in seq order: at most `limit`
        rows and about `max_bytes` of payload (at least one row), streamed by a server-side cursor."""
        params = {"session_id": session_id, "after_seq": after_seq, "up_to_seq": up_to_seq, "limit": limit}
        page: list[ExportRow] = []
        size = 0
        with self.conn.cursor(name="archive_export", withhold=False) as cur:
            cur.itersize = 500
            cur.execute(q("archive_export_page"), params)
            for seq, append_id, payload, digest, created_at, length, written_by in cur:
                page.append(ExportRow(seq, append_id, payload, bytes(digest), created_at, written_by))
                size += length
                if size >= max_bytes:
                    break
        return page

    def export_decisions(self, session_id: str) -> list[dict[str, Any]]:
        """Every version of the session's decisions, each as the row it was."""
        return [row["row"] for row in self._all("archive_export_decisions", {"session_id": session_id})]

    def export_context(self, session_id: str) -> list[dict[str, Any]]:
        return [row["row"] for row in self._all("archive_export_context", {"session_id": session_id})]

    # verify -----------------------------------------------------------------------------------
    def memory_rows(self, session_ids: list[str]) -> tuple[dict[str, list[dict[str, Any]]],
                                                           dict[str, list[dict[str, Any]]]]:
        """(decision versions, context revisions) per session, for verify."""
        decisions: dict[str, list[dict[str, Any]]] = {}
        context: dict[str, list[dict[str, Any]]] = {}
        for row in self._all("archive_all_decisions", {"session_ids": session_ids}):
            decisions.setdefault(row["session_id"], []).append(row["row"])
        for row in self._all("archive_all_context", {"session_ids": session_ids}):
            context.setdefault(row["session_id"], []).append(row["row"])
        return decisions, context

    def done_watermarks(self) -> dict[str, tuple[int, list[int]]]:
        return {row["session_id"]: (row["up_to_seq"], row["snapshot_ids"]) for row in self._all("archive_done_watermarks")}

    def sessions_lineage(self, session_ids: list[str]) -> dict[str, dict[str, Any]]:
        rows = self._all("archive_sessions_lineage", {"session_ids": session_ids})
        return {row["session_id"]: row for row in rows}

    def snapshot_seqs(self) -> dict[int, tuple[str, int]]:
        """snapshot_id → (session_id, up_to_seq) of every snapshot this role reads."""
        return {row["snapshot_id"]: (row["session_id"], row["up_to_seq"]) for row in self._all("archive_snapshot_seqs")}

    def db_digests(self, up_to: dict[str, int]) -> dict[str, tuple[int, int, bytes]]:
        """session → (message count, last seq, sha256 over the payload hashes in seq order), own rows ≤ up_to."""
        ids = list(up_to)
        rows = self._all("archive_db_digests", {"session_ids": ids, "up_to": [up_to[i] for i in ids]})
        return {row["session_id"]: (row["messages"], row["last_seq"], bytes(row["digest"])) for row in rows}

    # restore ----------------------------------------------------------------------------------
    def has_sessions(self) -> bool:
        return bool(scalar(self.conn, q("restore_has_sessions"), what="restore_has_sessions"))

    def current_role(self) -> str:
        return str(scalar(self.conn, q("restore_current_role"), what="restore_current_role"))

    def restore_mark_archived(self, snapshot_ids: list[int]) -> int:
        """The restored snapshots' exports are done (they came from the archive); the jobs added."""
        return self.conn.execute(q("restore_mark_archived"), {"snapshot_ids": snapshot_ids}).rowcount

    def restore_session(self, doc: dict[str, Any]) -> None:
        params = {key: doc.get(key) for key in ("session_id", "project_id", "agent_source", "title",
                                                "parent_session_id", "fork_seq", "created_by", "created_at")}
        params["meta"] = Jsonb(doc.get("meta") or {})
        self.conn.execute(q("restore_insert_session"), params)

    def start_message_restore(self) -> None:
        self.conn.execute(q("restore_temp_messages"))

    def copy_session_messages(self, rows: Iterable[RestoredMessage]) -> int:
        """COPY one session's rows into the temp table, then into messages; the rows inserted."""
        self.conn.execute(q("restore_clear_temp"))
        with self.conn.cursor() as cur, cur.copy(q("restore_copy_messages")) as copy:
            for r in rows:
                copy.write_row((r.session_id, r.seq, r.project_id, r.append_id, r.role, Jsonb(r.payload),
                                r.payload_hash, r.created_at, r.written_by))
        return self.conn.execute(q("restore_insert_messages")).rowcount

    def restore_decision(self, *, session_id: str, project_id: str, row: dict[str, Any], tsv: str,
                         first: bool) -> int:
        """One archived decision version: the first inserts the decision, later ones update it."""
        name = "restore_insert_decision" if first else "restore_update_decision"
        params = {"session_id": session_id, "project_id": project_id, "row": Jsonb(row), "tsv": tsv}
        return self.conn.execute(q(name), params).rowcount

    def restore_context(self, *, session_id: str, project_id: str, row: dict[str, Any]) -> int:
        params = {"session_id": session_id, "project_id": project_id, "row": Jsonb(row)}
        return self.conn.execute(q("restore_insert_context"), params).rowcount

    def restore_snapshot(self, snapshot: dict[str, Any]) -> None:
        params = dict(snapshot)
        params["meta"] = Jsonb(params.get("meta") or {})
        self.conn.execute(q("restore_insert_snapshot"), params)

    def restore_parent_snapshot(self, session_id: str, parent_snapshot_id: int) -> None:
        self.conn.execute(q("restore_set_parent_snapshot"),
                          {"session_id": session_id, "parent_snapshot_id": parent_snapshot_id})

    def restore_last_seq(self, session_ids: list[str]) -> None:
        self.conn.execute(q("restore_set_last_seq"), {"session_ids": session_ids})

    def reset_snapshot_identity(self) -> None:
        self.conn.execute(q("restore_reset_identity"))


class PooledConnection(Invalid):
    """A connection that must stay on one server backend goes through a pooler."""


def refuse_pooled(conn: psycopg.Connection, what: str) -> None:
    """Raise PooledConnection when `conn` reaches PostgreSQL through a pooler (db.through_pooler)."""
    if through_pooler(conn):
        raise PooledConnection(
            f"{what} must stay on one PostgreSQL connection, but this DSN goes through a connection pooler "
            "(PgBouncer): its session would move between server connections and hold the lease for nobody. "
            "Set [database] direct_dsn to a DSN that reaches PostgreSQL directly (and pgbouncer = true)")


class LeaderLock:
    """The single writer's lease (migration 0014) on its own direct connection: the lease names this
    connection's backend, so losing the connection loses the lease (the standby sees the backend gone
    and takes over). `held()` renews it before every job: an archiver that lost it stops writing and
    becomes a standby.

    The queue is worked on this same connection (`store()`): the database functions behind it refuse
    any connection that does not hold the lease, so a standby cannot claim or finish a job even by
    mistake. A standby keeps its connection between tries (`owned` stays False until it wins), and
    each try records it, so `archive status` lists it."""

    def __init__(self, db: Database, worker: str, *, lease: float = LEADER_LEASE_SECONDS) -> None:
        self.db = db
        self.worker = worker
        self.lease = lease
        self.conn: psycopg.Connection | None = None
        self.owned = False

    def _ask(self) -> bool:
        assert self.conn is not None
        with translate_errors():
            return bool(scalar(self.conn, q("archive_try_lock"), {"worker": self.worker, "lease": self.lease},
                               what="archive_try_lock"))

    def connect(self) -> psycopg.Connection:
        """The lease's own connection (opened when missing); PooledConnection when it goes through
        a pooler, where the lease could not stay on it."""
        if self.conn is None or self.conn.closed:
            self.owned = False
            self.conn = self.db.connect(autocommit=True, keepalives=1, keepalives_idle=5,
                                        keepalives_interval=2, keepalives_count=3)
            refuse_pooled(self.conn, "the archiver's lease")
        return self.conn

    def try_acquire(self) -> bool:
        try:
            self.connect()
            got = self._ask()
        except PooledConnection:
            self.release()
            raise
        except (McpMemoryError, psycopg.Error) as exc:
            log.warning("archiver lock: %s", exc)
            self.release()
            return False
        self.owned = got
        return self.owned

    def held(self) -> bool:
        """True while this connection still holds the lease (renewed by asking)."""
        if not self.owned or self.conn is None or self.conn.closed:
            return False
        try:
            if self._ask():
                return True
        except (McpMemoryError, psycopg.Error):
            pass
        self.release()
        return False

    def store(self) -> ArchiveStore:
        """The queue statements, on the lock's own connection (autocommit: each is one statement)."""
        if not self.owned or self.conn is None:
            raise Unavailable("the archiver lock is not held")
        return ArchiveStore(self.conn)

    def release(self) -> None:
        owned, self.owned = self.owned, False
        conn, self.conn = self.conn, None
        if conn is not None and not conn.closed:
            try:
                if owned:
                    conn.execute(q("archive_unlock"))  # a clean stop: the standby need not wait
                conn.close()
            except psycopg.Error:
                pass


class Listener:
    """LISTEN on a dedicated autocommit connection; reconnects on the next wait after a failure, and
    falls back to sleeping out the timeout (the polling fallback) while the database is away."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.conn: psycopg.Connection | None = None

    def listen(self) -> bool:
        """Make sure LISTEN is active; True when it was (re)started just now, i.e. NOTIFYs sent
        before may have been missed and the caller should look at the queue."""
        if self.conn is not None and not self.conn.closed:
            return False
        self.conn = self.db.connect(autocommit=True)
        with translate_errors():  # a server lost between connect and LISTEN: Unavailable, retried
            self.conn.execute(q("archive_listen"))
        return True

    def wait(self, timeout: float) -> bool:
        """Block up to `timeout` seconds; True when a NOTIFY arrived (or LISTEN had to be restarted)."""
        try:
            if self.listen():
                return True
            assert self.conn is not None
            return any(True for _ in self.conn.notifies(timeout=timeout, stop_after=1))
        except (psycopg.Error, McpMemoryError) as exc:
            log.warning("archive listener: %s (polling until the database is back)", exc)
            self.close()
            time.sleep(timeout)
            return False

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None and not conn.closed:
            try:
                conn.close()
            except psycopg.Error:
                pass
