"""Request bodies: read up to the size limit, then decoded and screened off the event loop.

`jsoncheck.loads` is linear in the body's size, but a body at the limit (32 MiB by default) still
takes a few tenths of a second; run on the event loop, every other client (`/healthz` included)
would wait that long per hostile request. A worker thread leaves the loop free.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import Message, Receive

from .. import jsoncheck
from ..errors import Invalid
from .errors import TooLarge


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with 413 past `limit` bytes (declared or streamed) before it is kept."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"body is larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"body is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def decode(raw: bytes, limit: int) -> Any:
    """The JSON body (None when empty), checked for size, shape and text PostgreSQL cannot hold."""
    if not raw.strip():
        return None
    body = jsoncheck.loads(raw, limit=limit, what="body")
    problem = jsoncheck.bad_text(body, ["body"], allow_nul=True)  # U+0000 is the routes' and the core's
    if problem:
        raise Invalid(problem)
    return body


async def read_json(request: Request, limit: int) -> Any:
    """The JSON body, read with `read_body` and decoded in a worker thread: every bad body is a 4xx."""
    raw = await read_body(request, limit)
    return await run_in_threadpool(decode, raw, limit)


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
