"""Hostile requests over stdio and REST: every one gets a coded answer naming the field, in time.

A raw `mcp-memory serve` subprocess is fed lines the SDK's own reader would drop silently (a lone
surrogate, JSON nested 5,000 deep, a line past the size limit); each must be answered within a
second by `[invalid]`, and the server must go on answering the next request.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from mcp_memory import jsoncheck
from mcp_memory.errors import Invalid
from mcp_memory.mcp import wire as stdio_wire

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "hostile", "version": "1"}}}


class Wire:
    """A `serve` subprocess spoken to line by line; replies are read by a thread (never blocks)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "mcp_memory", "serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.replies: queue.Queue[dict] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.replies.put(json.loads(line))

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def send(self, request: dict) -> None:
        self.send_raw(json.dumps(request).encode())

    def reply(self, timeout: float) -> dict:
        return self.replies.get(timeout=timeout)

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(timeout=10)  # it ends at the pipe's end; then the pipe is closed, not left to GC
            self.proc.stdout.close()


@pytest.fixture
def wire(settings, profile) -> Iterator[Wire]:
    w = Wire({**profile, "MCP_MEMORY_DSN": settings.dsn})
    try:
        w.send(INIT)
        assert w.reply(30)["id"] == 1
        w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield w
    finally:
        w.close()


def _call(request_id: int, name: str, arguments: str) -> bytes:
    return (f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", '
            f'"params": {{"name": "{name}", "arguments": {arguments}}}}}').encode()


def _answered(w: Wire, request_id: int, within: float = 1.0) -> str:
    started = time.monotonic()
    reply = w.reply(timeout=within + 5)
    elapsed = time.monotonic() - started
    assert reply["id"] == request_id
    assert elapsed < within, f"answered after {elapsed:.2f} s"
    if "error" in reply:
        return reply["error"]["message"]
    assert reply["result"]["isError"] is True
    return reply["result"]["content"][0]["text"]


def test_lone_surrogate_is_answered_naming_the_field(wire: Wire) -> None:
    wire.send_raw(_call(2, "create_session", '{"project_id": "p", "meta": {"title": "\\ud800"}}'))
    text = _answered(wire, 2)
    assert text.startswith("[invalid] meta.title:") and "surrogate" in text


def test_deep_nesting_is_answered_naming_the_field(wire: Wire) -> None:
    deep = '{"a": ' * 5000 + "1" + "}" * 5000
    wire.send_raw(_call(3, "create_session", f'{{"project_id": "p", "meta": {deep}}}'))
    text = _answered(wire, 3)
    assert text.startswith("[invalid]") and "meta" in text and "nested deeper" in text
    wire.send_raw(b'{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": ' + b"[" * 5000 + b"]" * 5000 + b"}")
    assert _answered(wire, 4).startswith("[invalid] request.params")


def test_nul_outside_message_payloads_names_the_field(wire: Wire) -> None:
    wire.send_raw(_call(5, "create_session", '{"project_id": "p\\u0000q"}'))
    assert _answered(wire, 5).startswith("[invalid] project_id: holds U+0000")


def test_oversized_line_is_refused_before_parsing(settings, profile) -> None:
    home = profile["MCP_MEMORY_HOME"]
    os.makedirs(f"{home}/mcp-memory", exist_ok=True)
    with open(f"{home}/mcp-memory/config.toml", "w") as f:
        f.write("[limits]\nmax_request_bytes = 65536\n")
    w = Wire({**profile, "MCP_MEMORY_DSN": settings.dsn})
    try:
        w.send(INIT)
        assert w.reply(30)["id"] == 1
        big = json.dumps({"session_id": "ses_x", "message": {"role": "user", "content": "x" * 200_000}})
        w.send_raw(_call(6, "append_message", big))
        text = _answered(w, 6)
        assert text.startswith("[invalid] request: larger than the limit of 65536 bytes")
        w.send({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
        assert w.reply(10)["id"] == 7  # the stream goes on after the skipped line
    finally:
        w.close()


def test_escape_pairs_near_the_size_limit_are_answered_quickly(wire: Wire) -> None:
    """An unterminated string of `\\"` pairs once cost time quadratic in its length (40 KB: 16.6 s)
    on the event loop; at 32 MiB it is now answered within seconds, and the next request at once."""
    pairs = (31 * 1024 * 1024) // 2
    started = time.monotonic()
    wire.send_raw(_call(10, "create_session", '{"project_id": "' + '\\"' * pairs))
    text = _answered(wire, 10, within=5.0)
    print(f"31 MiB of escape pairs answered {time.monotonic() - started:.2f} s after the first byte")
    assert text.startswith("[invalid] request: not valid JSON")
    wire.send({"jsonrpc": "2.0", "id": 11, "method": "ping"})
    assert _answered_ok(wire, 11)


def _answered_ok(w: Wire, request_id: int) -> bool:
    reply = w.reply(timeout=5)
    return reply["id"] == request_id and "error" not in reply


def test_server_goes_on_after_refusals(wire: Wire) -> None:
    wire.send_raw(b'{"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"x": NaN}')
    assert _answered(wire, 8).startswith("[invalid] request")
    wire.send_raw(b"\xff\xfe not json")  # no id to answer: answered with id null, nothing breaks
    assert _answered(wire, None).startswith("[invalid] request")
    wire.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
               "params": {"name": "create_session", "arguments": {"project_id": "fine"}}})
    reply = wire.reply(30)
    assert reply["id"] == 9 and reply["result"]["structuredContent"]["session_id"].startswith("ses_")


@pytest.mark.parametrize(("raw", "field"), [
    (b'{"a": {"b": ' + b"[" * 70 + b"]" * 70 + b"}}", "body.a.b"),
    (b"[" * 65 + b"]" * 65, "body"),
])
def test_depth_check_names_the_path(raw: bytes, field: str) -> None:
    with pytest.raises(Invalid, match=rf"^{field}(\.|\[|:)"):
        jsoncheck.loads(raw, limit=10_000, what="body")


def test_depth_check_ignores_brackets_inside_strings() -> None:
    text = json.dumps({"content": "[" * 10_000 + '\\"{' * 100})
    assert jsoncheck.loads(text.encode(), limit=10**6)["content"].startswith("[[[")


def test_bad_text_names_keys_and_items() -> None:
    assert jsoncheck.bad_text({"m": [{"k": "ok"}, {"k": "\udc00"}]}, []).startswith("m[1].k: holds a lone")
    assert jsoncheck.bad_text({"message": {"content": "a\x00b"}}, [], nul_ok=frozenset({"message"})) is None
    assert jsoncheck.bad_text({"meta": {"t": "a\x00b"}}, [], nul_ok=frozenset({"message"})).startswith("meta.t:")


# -- property tests: hypothesis with the depth raised (thousands of levels), lone surrogates, NUL ----------

HOSTILE_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0xDFFF), max_size=8)
LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | HOSTILE_TEXT
JSON_VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(HOSTILE_TEXT, inner, max_size=3), max_leaves=12)
DEEP = hsettings(max_examples=40, deadline=None, database=None, derandomize=True,
                 suppress_health_check=list(HealthCheck))


def _nest(value, depth: int, kind: str):
    text = json.dumps(value)  # ensure_ascii: lone surrogates travel as \\udXXX escapes
    return ("[" * depth + text + "]" * depth) if kind == "list" else ('{"k": ' * depth + text + "}" * depth)


@DEEP
@given(value=JSON_VALUES, depth=st.integers(0, 6000), kind=st.sampled_from(["list", "dict"]),
       tool=st.sampled_from(["create_session", "append_message", "update_session_meta", "record_decision"]))
def test_every_screened_tool_call_gets_an_answer(value, depth: int, kind: str, tool: str) -> None:
    arguments = f'{{"session_id": "ses_x", "project_id": "p", "meta": {_nest(value, depth, kind)}}}'
    line = _call(41, tool, arguments)
    outcome = stdio_wire.screen(line, oversized=False, limit=10 * 1024 * 1024)
    if isinstance(outcome, stdio_wire.SessionMessage):  # accepted: then it is valid JSON-RPC within the limits
        assert depth <= jsoncheck.MAX_DEPTH
        return
    assert outcome is not None and outcome.id == 41
    text = outcome.result["content"][0]["text"]
    assert outcome.result["isError"] is True and text.startswith("[invalid] ")
    assert "meta" in text or "request" in text


@DEEP
@given(value=JSON_VALUES, depth=st.integers(0, 6000), kind=st.sampled_from(["list", "dict"]))
def test_every_screened_request_with_an_id_is_answered(value, depth: int, kind: str) -> None:
    line = f'{{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {{"x": {_nest(value, depth, kind)}}}}}'
    outcome = stdio_wire.screen(line.encode(), oversized=False, limit=10 * 1024 * 1024)
    assert outcome is not None
    if not isinstance(outcome, stdio_wire.SessionMessage):
        assert outcome.id == 7 and outcome.error.message.startswith("[invalid] request")


@pytest.mark.anyio
async def test_in_memory_and_http_clients_get_nul_named_too(service) -> None:
    from mcp import Client

    from mcp_memory.mcp.server import build_server

    async with Client(build_server(lambda: service), mode="legacy") as client:
        bad = await client.call_tool("create_session", {"project_id": "p", "meta": {"title": "a\x00b"}})
        assert bad.is_error and bad.content[0].text.startswith("[invalid] meta.title: holds U+0000")
        sid = (await client.call_tool("create_session", {"project_id": "p"})).structured_content["session_id"]
        fine = await client.call_tool("append_message", {"session_id": sid,
                                                         "message": {"role": "user", "content": "a\x00b"}})
        assert not fine.is_error  # message payloads keep their NUL replaced by the core
