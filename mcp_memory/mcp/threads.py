"""Work the stdio server hands to threads: the core's calls (they block on the database) and the
reading of stdin (it blocks on the pipe).

anyio's `to_thread.run_sync` costs about 120 µs per hop on a 2-core machine (a capacity limiter,
a cancel scope and a worker queue each time); an asyncio executor costs about 75 µs. A tool call
takes two hops (its line read, its call run), so on the event loop the server runs on (asyncio, as
the MCP SDK starts it) the hops go through executors; on another anyio backend they fall back to
`to_thread`.

Cancelling the awaiting task abandons the thread's work rather than waiting for it: a cancelled
tool call is not answered (MCP `notifications/cancelled`), and the call's own transaction still
ends on the database's side by its `call_timeout`.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")


class Workers:
    """Daemon threads taking jobs from one queue, started as needed up to `size`. Daemon threads,
    unlike concurrent.futures', never hold up the exit of the process: a thread still blocked on
    stdin (or on a database call) when the server ends is left behind, as anyio leaves it."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.Future[Any]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` in one of the threads, in a copy of the caller's context variables (as
        anyio's threads run: the HTTP transport names its service in one)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another anyio backend
            return await anyio.to_thread.run_sync(lambda: fn(*args), abandon_on_cancel=True)
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            start = self._idle <= 0 and self._threads < self.size
            if start:
                self._threads += 1
            else:
                self._idle -= 1  # taken (or the job waits for the first thread that frees up)
        context = contextvars.copy_context()
        self._jobs.put((lambda: context.run(fn, *args), future))
        if start:
            threading.Thread(target=self._work, name=f"{self.name}-{self._threads}", daemon=True).start()
        return await future

    def _work(self) -> None:
        while True:
            job, future = self._jobs.get()
            result, error = None, None
            try:
                result = job()
            except BaseException as exc:  # noqa: BLE001 — handed to the awaiting task, raised there
                error = exc
            try:
                future.get_loop().call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:  # the loop closed meanwhile: nobody waits for the answer
                pass
            del job, future, result, error
            with self._lock:
                self._idle += 1


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


# as many core calls at once as anyio's default thread limiter allowed
CALLS = Workers("mcp-memory-call", 40)
# stdin is read by one thread, one line at a time
READER = Workers("mcp-memory-stdin", 1)
