"""LISTEN for appends (migration 0011): one dedicated autocommit connection per process, shared by
every reader waiting in read_session(wait_seconds), and a thread that hands each NOTIFY to the
waiters of that session."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from ..errors import McpMemoryError
from .db import Database, through_pooler, translate_errors
from .sql import q, scalar

log = logging.getLogger(__name__)
POLL_SECONDS = 0.5  # how often the thread looks up from the socket to see whether it must stop
POOLED_POLL = 0.5  # how often a waiting reader reads again when LISTEN cannot work (behind a pooler)


def channel_key(db: Database, session_id: str) -> str:
    """What the trigger sends for a session: a keyed SHA-256 of its id that only the database can
    compute, and only for a caller that reads the session (migration 0014)."""
    with db.transaction() as conn:
        return str(scalar(conn, q("messages_channel_key"), {"session_id": session_id}, what="channel key"))


class AppendListener:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._waiters: dict[str, set[threading.Event]] = {}
        self._conn: psycopg.Connection | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.poll_seconds: float | None = None  # set when LISTEN cannot work here (a pooler): readers poll

    @contextmanager
    def waiting(self, key: str) -> Iterator[threading.Event]:
        """An event set on each append to the session of `key` (channel_key; or when the listener
        lost its connection: the reader then reads again). LISTEN is active when this returns, so
        an append committed after the caller's next read is never missed."""
        event = threading.Event()
        with self._lock:
            self._ensure_listening()
            self._waiters.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            with self._lock:
                waiters = self._waiters.get(key, set())
                waiters.discard(event)
                if not waiters:
                    self._waiters.pop(key, None)

    def _ensure_listening(self) -> None:
        if self.poll_seconds is not None:
            return  # a pooler in the way: readers poll instead
        if self._conn is not None and not self._conn.closed and self._thread is not None:
            return
        self._conn = self.db.connect(autocommit=True)
        if through_pooler(self._conn):
            # A NOTIFY reaches the server connection that ran LISTEN, which the pooler lends to
            # others between transactions: nothing would ever wake us. Poll instead, and say why.
            log.warning("append listener: the connection goes through a pooler (PgBouncer); read_session waits "
                        "poll every %.1fs — set [database] direct_dsn so that they wake on appends", POOLED_POLL)
            _close(self._conn)
            self._conn, self.poll_seconds = None, POOLED_POLL
            return
        try:
            with translate_errors():  # a server lost between connect and LISTEN: Unavailable, the reader retries
                self._conn.execute(q("messages_listen"))
        except McpMemoryError:
            _close(self._conn)
            self._conn = None
            raise
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(self._conn,), name="mcp-memory append listener",
                                        daemon=True)
        self._thread.start()

    def _run(self, conn: psycopg.Connection) -> None:
        try:
            while not self._stop.is_set():
                for notify in conn.notifies(timeout=POLL_SECONDS):
                    self._wake(self._waiters_of(notify.payload))
        except (psycopg.Error, McpMemoryError) as exc:
            if not self._stop.is_set():
                log.warning("append listener: %s (waiting readers read again; LISTEN restarts on the next wait)", exc)
        finally:
            with self._lock:
                if self._conn is conn:
                    self._conn, self._thread = None, None
                everyone = [e for waiters in self._waiters.values() for e in waiters]
            self._wake(everyone)
            _close(conn)

    def waiting_count(self) -> int:
        """Readers waiting now (for /metrics)."""
        with self._lock:
            return sum(len(events) for events in self._waiters.values())

    def connected(self) -> int:
        """1 while the LISTEN connection is open, else 0 (for /metrics)."""
        with self._lock:
            return int(self._conn is not None and not self._conn.closed)

    def _waiters_of(self, key: str) -> list[threading.Event]:
        with self._lock:
            return list(self._waiters.get(key, ()))

    @staticmethod
    def _wake(events: list[threading.Event]) -> None:
        for event in events:
            event.set()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout=POLL_SECONDS * 4)


def _close(conn: psycopg.Connection) -> None:
    try:
        conn.close()
    except psycopg.Error:
        pass
