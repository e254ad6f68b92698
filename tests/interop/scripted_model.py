"""A scripted model server on loopback for driving real agent CLIs in tests, offline.

It answers the Anthropic Messages API (`POST /v1/messages`, streamed as server-sent events or as one
JSON document, and `/v1/messages/count_tokens`) with replies chosen by a script, and keeps every
request body so that a test can assert what the agent sent its model: the prompts, and the tool
results it received from our MCP server.

The script is a function of the request: `script(request) -> list of blocks`, where a block is
`{"type": "text", "text": …}` or `{"type": "tool_use", "name": …, "input": {…}}`. Requests without
tools (titles, summaries the CLI asks for on the side) get a short text.

Wire facts relied on (Anthropic Messages API, as Claude Code 2.1 uses it): a streamed reply is the
event sequence message_start, then per content block content_block_start / content_block_delta
(text_delta, or input_json_delta carrying the tool input as JSON text) / content_block_stop, then
message_delta with the stop_reason (`tool_use` when the reply calls a tool, else `end_turn`) and
message_stop. Tool results come back as user messages holding `tool_result` blocks whose `content`
is a string or a list of text blocks.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Script = Callable[[dict[str, Any]], list[dict[str, Any]]]


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool_result block of the request, in order: {"tool_use_id", "text", "is_error"}."""
    found = []
    for message in request.get("messages", []):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                text = inner if isinstance(inner, str) else "".join(
                    b.get("text", "") for b in inner or [] if isinstance(b, dict))
                found.append({"tool_use_id": block.get("tool_use_id"), "text": text,
                              "is_error": bool(block.get("is_error"))})
    return found


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t.get("name", "") for t in request.get("tools") or []]


class ScriptedModel:
    """`with ScriptedModel(script) as model:` serves on model.url until the block ends."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def main_requests(self) -> list[dict[str, Any]]:
        """The agent loop's requests (those that offer tools), in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.get("tools")]

    def _record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends when the connection closes: no chunking

            def log_message(self, *args: object) -> None:
                return None

            def do_GET(self) -> None:
                self._json({"data": [], "has_more": False})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                if path.endswith("/count_tokens"):
                    return self._json({"input_tokens": 100})
                if not path.endswith("/messages"):
                    return self._json({})
                model._record(body)
                blocks = model.script(body) if body.get("tools") else [{"type": "text", "text": "Scripted title"}]
                blocks = [dict(b, id=f"toolu_{uuid.uuid4().hex[:20]}") if b["type"] == "tool_use" else b
                          for b in blocks]
                stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                if body.get("stream"):
                    return self._stream(body, blocks, stop)
                self._json({"id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant",
                            "model": body.get("model", "scripted"), "content": blocks, "stop_reason": stop,
                            "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 20}})

            def _json(self, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], blocks: list[dict[str, Any]], stop: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for event, data in _events(body.get("model", "scripted"), blocks, stop):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        return Handler


def _events(model: str, blocks: list[dict[str, Any]], stop: str) -> Iterator[tuple[str, dict[str, Any]]]:
    usage = {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    yield "message_start", {"type": "message_start", "message": {
        "id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 20}}
    yield "message_stop", {"type": "message_stop"}
