"""The search index follows the appends (README, design note 6, migration 0006).

An append commits its messages and tells this process's Indexer; once appends pause, a background
thread tokenizes them and writes message_search and the BM25 statistics in a transaction of its
own, a whole burst in one pass. The append's caller never waits for it.

Nothing is lost when a process dies in between: the append moved the session's `stored_seq` in
its own transaction, so search_progress shows the gap, and the next search of the project (or
`mcp-memory reindex`) indexes it. A search sees everything appended before it: it first finishes
this process's queue, then catches up the sessions of its project that are behind, waiting
through the per-session lock for an indexer of another process that is at work on one of them.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from .. import scaffolding
from ..errors import Forbidden, McpMemoryError, Unavailable
from ..search.index import index_message
from ..store.db import Database
from ..store.search_store import IndexRow, SearchStore, StoredText

log = logging.getLogger(__name__)

PASS_LIMIT = 2000  # messages per indexing transaction
# The worker indexes once appends pause for QUIET_SECONDS (an agent waiting on its model), so that
# a burst is indexed in one pass and the pass never competes with the appends for the CPU; under
# appends without pause it indexes every MAX_DELAY_SECONDS. Searches never wait for either: they
# catch up first.
QUIET_SECONDS = 0.1
MAX_DELAY_SECONDS = 10.0
CATCH_UP_SESSIONS = 50  # sessions of other processes caught up before one search, at most
EARLIER_CALLS = 200  # messages before a pass searched for the call a tool result answers


class Indexer:
    """One per Service. Thread-safe."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._queue: set[str] = set()
        self._cond = threading.Condition()
        self._turn = threading.Lock()  # one indexing pass at a time in this process
        self._worker: threading.Thread | None = None
        self._writable = True  # False once the database said this role may not write the index
        self._last_submit = 0.0

    def submit(self, session_id: str) -> None:
        """The session has new messages: index them soon, in the background."""
        with self._cond:
            self._last_submit = time.monotonic()
            self._queue.add(session_id)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run, name="mcp-memory-indexer", daemon=True)
                self._worker.start()
            self._cond.notify()

    def flush(self, *, background: bool = False) -> int:
        """Index, now and in the caller's thread, what this process appended; how many messages.
        `background`: the worker's pass, which lets tool calls of the process run between messages."""
        with self._turn:
            with self._cond:
                work, self._queue = self._queue, set()
            return sum(self._index_logged(session_id, background) for session_id in sorted(work))

    def catch_up(self, project_id: str | None = None) -> int:
        """Before a search: this process's queue, then sessions of the project that other
        processes left behind (all projects when None)."""
        done = self.flush()
        if not self._writable:
            return done
        try:
            with self.db.transaction() as conn:
                behind = SearchStore(conn).pending_sessions(project_id, CATCH_UP_SESSIONS)
        except McpMemoryError as exc:
            log.debug("search catch-up skipped: %s", exc)
            return done
        with self._turn:
            return done + sum(self._index_logged(session_id, False) for session_id in behind)

    def reindex(self, project_id: str | None = None, *, full: bool = False) -> int:
        """Every session whose index is behind, restored ones without a progress row included.
        `full`: rebuild every session's index from its messages (after a tokenizer change)."""
        done = self.flush()
        if full:
            return done + self._rebuild(project_id)
        while True:
            with self.db.transaction() as conn:
                behind = SearchStore(conn).pending_sessions(project_id, 500, untracked=True)
            if not behind:
                return done
            with self._turn:
                done += sum(self.index_session(session_id) for session_id in behind)

    def _rebuild(self, project_id: str | None) -> int:
        done, after = 0, ""
        while True:
            with self.db.transaction() as conn:
                batch = SearchStore(conn).sessions_after(project_id, after, 500)
            if not batch:
                return done
            for session_id in batch:
                with self._turn:
                    with self.db.transaction() as conn:
                        store = SearchStore(conn)
                        store.lock_session_index(session_id)
                        store.forget_session(session_id)
                    done += self.index_session(session_id)
            after = batch[-1]

    def close(self) -> None:
        """Finish the queue (the process is about to let go of the database)."""
        self.flush()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: self._queue, timeout=60):
                    if self._worker is threading.current_thread():
                        self._worker = None
                    return
            self._wait_for_quiet()
            self.flush(background=True)

    def _wait_for_quiet(self) -> None:
        started = time.monotonic()
        while True:
            now = time.monotonic()
            quiet_at = self._last_submit + QUIET_SECONDS
            if now >= quiet_at or now - started >= MAX_DELAY_SECONDS:
                return
            time.sleep(min(quiet_at - now, MAX_DELAY_SECONDS - (now - started)))

    def _index_logged(self, session_id: str, background: bool) -> int:
        if not self._writable:
            return 0
        try:
            return self.index_session(session_id, background=background)
        except Unavailable as exc:
            log.warning("search index of %s left for later: %s", session_id, exc)
        except Forbidden as exc:
            self._writable = False  # a read-only token: the writers keep the index
            log.info("search index of %s is left to the writers: %s", session_id, exc)
        except Exception:  # a failed pass must not take the server down; the watermark keeps the work
            log.exception("search index of %s left for later", session_id)
        return 0

    def index_session(self, session_id: str, *, background: bool = False) -> int:
        """Index the session's stored messages past its watermark; how many were indexed."""
        done = 0
        while True:
            with self.db.transaction() as conn:
                store = SearchStore(conn)
                mark = store.lock_session_index(session_id)
                if mark is None or mark.last_seq <= mark.indexed_seq:
                    return done
                up_to = min(mark.last_seq, mark.indexed_seq + PASS_LIMIT)
                rows = store.unindexed_messages(session_id, after_seq=mark.indexed_seq, up_to_seq=up_to,
                                                limit=PASS_LIMIT)
                calls = _memory_calls(store, session_id, rows, after_seq=mark.indexed_seq)
                store.index_pass(session_id, _index_rows(rows, calls, background), indexed_seq=up_to)
            done += len(rows)
            if up_to >= mark.last_seq:
                return done


def _memory_calls(store: SearchStore, session_id: str, rows: list[StoredText], *, after_seq: int) -> dict[str, str]:
    """call id → tool, for the calls of mcp-memory's tools these rows make or answer (a result whose
    call was indexed in an earlier pass: looked up among the EARLIER_CALLS messages before them)."""
    payloads = [row.payload for row in rows]
    calls = scaffolding.memory_calls(payloads)
    missing = scaffolding.unanswered(payloads, calls)
    if missing and after_seq > 0:
        earlier = store.earlier_calls(session_id, before_seq=after_seq, ids=missing, lookback=EARLIER_CALLS)
        calls.update({call_id: tool for call_id, name in earlier.items()
                      if (tool := scaffolding.memory_tool(name)) is not None})
    return calls


def _index_rows(rows: list[StoredText], calls: dict[str, str], background: bool) -> list[IndexRow]:
    out = []
    for number, row in enumerate(rows, 1):
        echo = scaffolding.echo_tool(row.payload, calls) is not None
        out.append(IndexRow(row.seq, row.role, row.created_at, index_message(row.payload, echo=echo), echo))
        if background and number % 16 == 0:
            # let a tool call that arrived run now, not at the end of the interpreter's switch
            # interval (5 ms): in `serve` the pass shares the process with the tool calls
            _yield_cpu()
    return out


_yield_cpu = getattr(os, "sched_yield", lambda: time.sleep(0))  # sched_yield releases the GIL
