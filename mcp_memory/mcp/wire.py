"""The stdio wire of `mcp-memory serve`: JSON-RPC lines read with a size bound and screened before
the SDK parses them, so that every request gets an answer.

The SDK's own stdio reader parses each line and, when that fails (a lone surrogate, nesting deeper
than its parser allows), hands the error to the session, which drops it: the client waits forever.
Here a line is read at most `limit` bytes at a time (a longer one is skipped to its end, keeping only
a prefix to find its id), checked by `jsoncheck` (size, UTF-8, depth, text PostgreSQL cannot store)
and parsed once, in a worker thread (linear in the line's size, yet a few tenths of a second at the
limit, which the event loop and the calls it is running need not wait for); a refused request is
answered at once with a coded `[invalid]` error naming the field (a tool error for `tools/call`, a
JSON-RPC error otherwise).
"""

from __future__ import annotations

import json
import re
import select
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from mcp.server import stdio as sdk_stdio
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .. import jsoncheck
from ..errors import Invalid
from . import threads
from .server import NUL_CLEANED

PREFIX_BYTES = 64 * 1024  # what is kept of an oversized line, to answer its id
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,30}|"[^"\\]{0,200}")')
_METHOD = re.compile(rb'"method"\s*:\s*"([a-z/_]{1,64})"')
PIPE_BUF = getattr(select, "PIPE_BUF", 512)  # POSIX's least; Windows has no poll: the worker writes
_POLL = getattr(select, "poll", None)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


def read_line(stream: BinaryIO, limit: int) -> tuple[bytes, bool] | None:
    """One line of at most `limit` bytes, or its prefix and True when it is longer (the rest is
    read and dropped in bounded pieces). None at end of input."""
    line = stream.readline(limit + 1)
    if not line:
        return None
    if len(line) <= limit or line.endswith(b"\n"):
        return line, False
    prefix = line[:PREFIX_BYTES]
    while line and not line.endswith(b"\n"):
        line = stream.readline(1024 * 1024)
    return prefix, True


_UNPARSED = object()
_END = object()


def next_message(stream: BinaryIO, limit: int) -> Any:
    """The next line, read and screened: what `screen` says of it (a message, an answer, or None),
    or _END at the end of input."""
    item = read_line(stream, limit)
    if item is None:
        return _END
    return screen(item[0], oversized=item[1], limit=limit)


def screen(line: bytes, *, oversized: bool, limit: int) -> SessionMessage | types.JSONRPCMessage | None:
    """The message to hand to the session, the answer to send back instead, or None (nothing to do)."""
    if not oversized and not line.strip():
        return None
    value: Any = _UNPARSED
    try:
        if oversized:
            raise Invalid(f"request: larger than the limit of {limit} bytes (limits.max_request_bytes)")
        value = jsoncheck.loads(line, limit=limit)
        problem = unusable_id(value)
        if problem:
            raise Invalid(problem)
        _check_text(value)
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(value, by_name=False))
    except Invalid as exc:
        return refusal(line, exc, value)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": str(exc)}
        where = jsoncheck.field_name(str(p) for p in first.get("loc", ()))
        return refusal(line, Invalid(f"request.{where}: {first.get('msg')} (not a JSON-RPC 2.0 message)"), value)


def unusable_id(value: Any) -> str | None:
    """Why a parsed message's `id` cannot be answered to, or None (a usable id, or none: a notification).
    Without this an id of null, a number with a fraction, true or an object made the message a
    notification, which nothing answers: the client waited forever."""
    if not isinstance(value, dict) or "id" not in value:
        return None
    request_id = value["id"]
    if isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool)):
        return None
    kind = "null" if request_id is None else type(request_id).__name__.replace("dict", "object").replace("list", "array")
    return f"request.id must be a string or an integer, got {kind} (JSON-RPC 2.0 as MCP uses it)"


def _check_text(value: Any) -> None:
    if not isinstance(value, dict):
        return
    params = value.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    if value.get("method") == "tools/call" and isinstance(arguments, dict):
        problem = jsoncheck.bad_text(arguments, [], nul_ok=NUL_CLEANED)
        if problem:
            raise Invalid(problem)
    problem = jsoncheck.bad_text(value, ["request"], allow_nul=True)
    if problem:
        raise Invalid(problem)


def refusal(line: bytes, exc: Invalid, value: Any = _UNPARSED) -> types.JSONRPCMessage | None:
    """The answer to a refused line: a tool error for a tool call, else a JSON-RPC error — with id null
    when the line has no usable id (JSON-RPC 2.0: a request whose id cannot be read is answered with a
    null id); None for a notification (a method and no id at all: nothing may answer it)."""
    if value is _UNPARSED:  # not parsed: what its prefix shows
        request_id = _peek(_ID, line)
        if request_id is None and _peek(_METHOD, line) is not None and b'"id"' not in line[:PREFIX_BYTES]:
            return None
    elif isinstance(value, dict) and "id" not in value and isinstance(value.get("method"), str):
        return None
    else:
        request_id = value.get("id") if isinstance(value, dict) and unusable_id(value) is None else None
    text = exc.render()
    if request_id is None:
        code = PARSE_ERROR if value is _UNPARSED else INVALID_REQUEST
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=text))
    if _peek(_METHOD, line) == "tools/call":
        result = types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        return types.JSONRPCResponse(jsonrpc="2.0", id=request_id,
                                     result=result.model_dump(by_alias=True, exclude_none=True, mode="json"))
    code = INVALID_PARAMS if b'"params"' in line[:PREFIX_BYTES] else INVALID_REQUEST
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=text))


def _peek(pattern: re.Pattern[bytes], line: bytes) -> Any:
    match = pattern.search(line[:PREFIX_BYTES])
    if match is None:
        return None
    value = json.loads(match.group(1)) if pattern is _ID else match.group(1).decode()
    return value


@asynccontextmanager
async def stdio(limit: int) -> AsyncIterator[tuple[Any, Any]]:
    """Like the SDK's `stdio_server()` (same claim of fds 0 and 1), with the screened reader."""
    stdin, release_in = sdk_stdio._claim_fd(0, sys.stdin, "rb", sdk_stdio._open_stdin_diversion)
    stdout, release_out = sdk_stdio._claim_fd(1, sys.stdout, "wb", sdk_stdio._open_stdout_diversion)
    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)
    answers = write_stream.clone()

    async def reader() -> None:
        async with read_writer, answers:
            # one worker-thread hop per line: reading it (blocking) and screening it (linear, but a
            # 100 MB line takes a while) both stay off the event loop
            while (outcome := await threads.READER.run(next_message, stdin, limit)) is not _END:
                if isinstance(outcome, SessionMessage):
                    await read_writer.send(outcome)
                elif outcome is not None:
                    await answers.send(SessionMessage(outcome))

    async def writer() -> None:
        async with write_reader:
            async for message in write_reader:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                encoded = data.encode("utf-8", errors="backslashreplace")
                if not _write_now(stdout, encoded):
                    await anyio.to_thread.run_sync(_write, stdout, encoded)

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(reader)
            tasks.start_soon(writer)
            yield read_stream, write_stream
    finally:
        for release in (release_out, release_in):
            if release is not None:
                release()


def _write(stream: BinaryIO, data: bytes) -> None:
    stream.write(data)
    stream.flush()


def _write_now(stream: BinaryIO, data: bytes) -> bool:
    """Write a short answer from the event loop when the pipe has room for it, which cannot block:
    a pipe that poll(2) reports writable takes PIPE_BUF bytes whole. The hop to a worker thread
    (and its wake-up) is for a long answer or a full pipe, whose reader may take its time."""
    if _POLL is None or len(data) > PIPE_BUF:
        return False
    try:
        poller = _POLL()
        poller.register(stream.fileno(), select.POLLOUT)
        if not poller.poll(0):
            return False
    except (OSError, ValueError):  # not a pollable file (a test's stream): the worker writes it
        return False
    _write(stream, data)
    return True
