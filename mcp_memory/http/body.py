"""Request bodies: read up to the size limit within a time limit, then decoded and screened off the
event loop, with few big bodies in memory at once.

`jsoncheck.loads` is linear in the body's size, but a body at the limit (32 MiB by default) still
takes a few tenths of a second; run on the event loop, every other client (`/healthz` included)
would wait that long per hostile request. A worker thread leaves the loop free.

A big body costs several times its size while it is read and decoded (the bytes, the text, the
parsed value): 24 bodies of 31 MB at once took the process past 2 GB, and glibc kept most of it.
So a body past `big_bytes` waits for one of `big_at_once` places before it is read (the rest stays
in the client's socket meanwhile: uvicorn stops reading a connection whose body the app does not
take), and once it is done the free memory goes back to the system (guard.trim_memory).
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import Message, Receive

from .. import jsoncheck
from ..errors import Invalid
from .errors import Busy, TimedOut, TooLarge
from .guard import trim_memory

BIG_BYTES = 1024 * 1024


class Bodies:
    """The body rules of one app: `limit` bytes at most, read within `body_seconds`, and at most
    `big_at_once` bodies past `big_bytes` in memory at once (a later one waits `wait_seconds` for a
    place, then 503)."""

    def __init__(self, limit: int, *, big_bytes: int = BIG_BYTES, big_at_once: int = 2, body_seconds: float = 60.0,
                 wait_seconds: float = 30.0) -> None:
        self.limit = limit
        self.big_bytes = big_bytes
        self.big_at_once = max(1, big_at_once)
        self.body_seconds = body_seconds
        self.wait_seconds = wait_seconds
        self._places: anyio.Semaphore | None = None  # made in the server's event loop, on first use

    def places(self) -> anyio.Semaphore:
        if self._places is None:
            self._places = anyio.Semaphore(self.big_at_once)
        return self._places

    async def read(self, request: Request) -> bytes:
        """The raw body, refused with 413 past `limit` bytes (declared or streamed) before it is kept."""
        return (await self._read(request, decode=False))[0]

    async def json(self, request: Request) -> Any:
        """The JSON body, decoded in a worker thread: every bad body is a 4xx."""
        return (await self._read(request, decode=True))[1]

    async def _read(self, request: Request, *, decode: bool) -> tuple[bytes, Any]:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.limit:
            raise TooLarge(f"body is larger than {self.limit} bytes")
        big = bool(declared and declared.isdigit() and int(declared) > self.big_bytes)
        held = False
        try:
            if big:
                held = await self._take_place()
            buffer = bytearray()
            with anyio.move_on_after(self.body_seconds) as scope:
                async for chunk in request.stream():
                    buffer += chunk
                    if len(buffer) > self.limit:
                        raise TooLarge(f"body is larger than {self.limit} bytes")
                    if not held and len(buffer) > self.big_bytes:  # a chunked body grew big
                        held = big = await self._take_place()
            if scope.cancelled_caught:
                raise TimedOut(f"the body was not received within {self.body_seconds:g} s")
            raw = bytes(buffer)
            del buffer
            value = await run_in_threadpool(decode_json, raw, self.limit) if decode else None
            return (b"" if decode else raw), value
        finally:
            if held:
                self.places().release()
            if big:
                await run_in_threadpool(trim_memory)

    async def _take_place(self) -> bool:
        with anyio.move_on_after(self.wait_seconds):
            await self.places().acquire()
            return True
        raise Busy(f"too many big bodies (over {self.big_bytes} bytes) are being received at once; retry shortly",
                   retry_after=1)


def decode_json(raw: bytes, limit: int) -> Any:
    """The JSON body (None when empty), checked for size, shape and text PostgreSQL cannot hold."""
    if not raw.strip():
        return None
    body = jsoncheck.loads(raw, limit=limit, what="body")
    problem = jsoncheck.bad_text(body, ["body"], allow_nul=True)  # U+0000 is the routes' and the core's
    if problem:
        raise Invalid(problem)
    return body


def replay(raw: bytes, receive: Receive) -> Receive:
    """A `receive` that hands an app the body already read, then the client's own messages."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return again
