"""Connection guard for serve-http: a header-read timeout and a connection cap on uvicorn's h11
protocol, the file-descriptor limit raised to what the system allows, and memory handed back to the
system after big request bodies.

uvicorn times out only idle keep-alive connections, and any byte received cancels that timer: a
client that sends its headers one byte at a time (or nothing at all after connecting) holds a socket
forever, and about a thousand of them exhausted the default limit of 1,024 descriptors, after which
every new connection failed. Here every connection that waits for a request's headers (a new one, or
a kept-alive one after its response) is closed once `header_seconds` pass without a complete request
line and headers, and beyond `max_connections` the connection that has waited longest for its
headers is closed to make room: a flood of half-open sockets never locks out a client that sends a
whole request.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import resource
from collections import OrderedDict
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

FD_RESERVE = 128  # descriptors kept for the database pool, the listener, log files and threads
M_MMAP_THRESHOLD = -3  # glibc mallopt(3): allocations at least this large are mmap'd (and unmapped on free)
MMAP_THRESHOLD = 256 * 1024


class Guard:
    """The state one server's protocols share: who is waiting for headers, oldest first."""

    def __init__(self, *, header_seconds: float, max_connections: int) -> None:
        self.header_seconds = header_seconds
        self.max_connections = max(1, max_connections)
        self.waiting: OrderedDict[GuardedH11, None] = OrderedDict()
        self.open = 0

    def make_room(self, newcomer: GuardedH11) -> None:
        """Past the cap, close the connection that has waited longest for its headers (the newcomer
        itself only when every other connection is busy with a request)."""
        while self.open > self.max_connections:
            victim = next(iter(self.waiting), newcomer)
            victim.drop()
            if victim is newcomer:
                return


def guarded_protocol(guard: Guard) -> type[H11Protocol]:
    """uvicorn's h11 protocol bound to `guard` (passed as `uvicorn.Config(http=...)`)."""
    return type("GuardedH11Bound", (GuardedH11,), {"guard": guard})


class GuardedH11(H11Protocol):
    guard: Guard
    _header_timer: asyncio.TimerHandle | None = None
    _counted = False

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.guard.open += 1
        self._counted = True
        self._wait_for_headers()
        self.guard.make_room(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        if self._counted:
            self._counted = False
            self.guard.open -= 1
        super().connection_lost(exc)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request's headers arrived: its body is the app's to time
            self._stop_waiting()

    def on_response_complete(self) -> None:
        if not self.transport.is_closing():
            self._wait_for_headers()  # the next request on a kept-alive connection
        super().on_response_complete()

    def _wait_for_headers(self) -> None:
        self._stop_waiting()
        self.guard.waiting[self] = None
        self._header_timer = self.loop.call_later(self.guard.header_seconds, self.drop)

    def _stop_waiting(self) -> None:
        self.guard.waiting.pop(self, None)
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def drop(self) -> None:
        """Close a connection that sent no complete request in time (or made room for another)."""
        self._stop_waiting()
        if self._counted:  # counted out now: connection_lost comes on a later turn of the loop
            self._counted = False
            self.guard.open -= 1
        if not self.transport.is_closing():
            self.transport.abort()


def raise_fd_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (a process may, unprivileged); the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, hard, exc)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def connection_cap(configured: int, fd_limit: int) -> int:
    """`[http] max_connections`, kept FD_RESERVE below the descriptor limit."""
    return max(16, min(configured, fd_limit - FD_RESERVE))


def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def tune_malloc() -> None:
    """Big allocations (a request body, its decoded strings) straight from mmap, so that freeing them
    gives the memory back; glibc would otherwise raise its threshold to 32 MiB after the first big
    free and keep every later big body in the heap. Not glibc (musl, macOS): nothing to do."""
    if _LIBC is not None and hasattr(_LIBC, "mallopt"):
        _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def trim_memory() -> None:
    """Return the free pages of every malloc arena to the system (glibc malloc_trim(3))."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
