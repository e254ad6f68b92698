"""read_session(wait_seconds): with nothing after `after_seq`, wait until any process appends to
the session (a NOTIFY sent at commit, migration 0011), bounded by the timeout; empty at the end."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..errors import Invalid
from ..inputs import MAX_WAIT_SECONDS
from ..results import Page
from ..store.append_listener import AppendListener, channel_key
from ..store.db import Database


class AppendWaiter:
    """Waits of one service: the channel key is asked in the service's own role (the database answers
    only for sessions that role reads), the LISTEN is the process's. A service of its own makes its
    listener, started on the first wait (most processes never wait); the per-token services of
    serve-http share the server's one listener (`listener`), so however many tokens long-poll at
    once, they hold one connection for LISTEN, not one each."""

    def __init__(self, db: Database, listener: AppendListener | None = None) -> None:
        self.db = db
        self._owned = listener is None
        self.listener = listener or AppendListener(db)

    def close(self) -> None:
        if self._owned:
            self.listener.close()


def check_wait(wait_seconds: object) -> float:
    if isinstance(wait_seconds, bool) or not isinstance(wait_seconds, int | float) \
            or not 0 <= wait_seconds <= MAX_WAIT_SECONDS:
        raise Invalid(f"wait_seconds must be a number from 0 to {MAX_WAIT_SECONDS}")
    return float(wait_seconds)


def read_or_wait(waiter: AppendWaiter, session_id: str, read: Callable[[], Page], *, wait_seconds: float) -> Page:
    first = read()
    if check_wait(wait_seconds) == 0 or first.messages:
        return first
    deadline = time.monotonic() + wait_seconds
    with waiter.listener.waiting(channel_key(waiter.db, session_id)) as appended:
        while True:
            page = read()  # LISTEN is on: whatever commits after this read wakes us
            remaining = deadline - time.monotonic()
            if page.messages or remaining <= 0:
                return page
            # behind a pooler nothing wakes us (the listener polls): read again every poll_seconds
            poll = waiter.listener.poll_seconds
            appended.wait(remaining if poll is None else min(remaining, poll))
            appended.clear()
