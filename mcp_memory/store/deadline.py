"""Client-side deadlines for database calls: a call that gets no answer in time is cut off.

`statement_timeout` and `lock_timeout` are enforced by the server; a server that is frozen
(SIGSTOP, a hung host, a dropped network) enforces nothing, and a blocked read on its socket waits
forever. A single watchdog thread keeps the deadline of every call in progress; when one passes, it
shuts the connection's socket down (`shutdown(2)` wakes the reader at once), so the call fails with
a driver error that the store answers as `[unavailable]`, and the pool discards the connection.
Arming and disarming a deadline is a dict operation: the thread looks every `TICK` seconds.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg

log = logging.getLogger(__name__)

TICK = 0.1


@dataclass
class Armed:
    conn: psycopg.Connection
    at: float
    seconds: float
    key: int
    fired: bool = False


class Watchdog:
    def __init__(self) -> None:
        self._armed: dict[int, Armed] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def arm(self, conn: psycopg.Connection, seconds: float) -> Armed | None:
        """Cut `conn` off unless `disarm` is called within `seconds` (None, no deadline, when ≤ 0)."""
        if seconds <= 0:
            return None
        entry = Armed(conn, time.monotonic() + seconds, seconds, next(self._ids))
        self._armed[entry.key] = entry
        self._start()
        return entry

    def disarm(self, entry: Armed | None) -> None:
        if entry is not None:
            self._armed.pop(entry.key, None)

    @contextmanager
    def guard(self, conn: psycopg.Connection, seconds: float) -> Iterator[Armed | None]:
        entry = self.arm(conn, seconds)
        try:
            yield entry
        finally:
            self.disarm(entry)

    def _start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="mcp-memory-deadline", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(TICK)
            now = time.monotonic()
            for key, entry in list(self._armed.items()):
                if entry.at <= now and self._armed.pop(key, None) is not None:
                    entry.fired = True
                    cut_off(entry.conn)


def cut_off(conn: psycopg.Connection) -> None:
    """Shut the connection's socket down under whoever is waiting on it."""
    try:
        fd = conn.pgconn.socket
    except psycopg.Error:
        return
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError as exc:
        log.debug("cannot shut down a database socket: %s", exc)
    finally:
        sock.close()


WATCHDOG = Watchdog()
