"""read_session(wait_seconds): with nothing after `after_seq`, wait until any process appends to
the session (a NOTIFY sent at commit, migration 0011), bounded by the timeout; empty at the end."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..errors import Invalid
from ..operations import MAX_WAIT_SECONDS
from ..results import Page
from ..store.append_listener import AppendListener, channel_key
from ..store.db import Database


class AppendWaiter:
    """The process's append listener, started on the first wait (most processes never wait)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.listener = AppendListener(db)

    def close(self) -> None:
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
            appended.wait(remaining)
            appended.clear()
