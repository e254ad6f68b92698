"""A scripted model server on loopback for driving real agent CLIs in tests, offline.

It answers four model APIs with replies chosen by a script, and keeps every request body so that a
test can assert what the agent sent its model: the prompts, the earlier conversation after a relay,
and the tool results it received from our MCP server.

- Anthropic Messages (Claude Code): `POST …/messages`, streamed as server-sent events or as one JSON
  document, and `…/messages/count_tokens`.
- OpenAI Chat Completions (OpenCode's openai-compatible provider): `POST …/chat/completions`.
- OpenAI Responses (Codex): `POST …/responses`, streamed.
- Gemini (Gemini CLI): `POST …/models/M:streamGenerateContent` and `:generateContent`, `:countTokens`.

The script is a function of the request: `script(request) -> list of blocks`, where a block is
`{"type": "text", "text": …}` or `{"type": "tool_use", "name": …, "input": {…}}`. A tool name the agent
does not offer is resolved by suffix among the offered ones (Claude Code names MCP tools
`mcp__mcp-memory__recall`, OpenCode `mcp-memory_recall`, Gemini CLI `recall`), so a script may say
`recall`. Requests without tools (titles, summaries, Gemini's next-speaker check) get a short text,
or for a JSON-schema request a JSON object. `tool_results`, `tool_names` and `transcript` read a
request of any of the four APIs.

Wire facts relied on:
- Anthropic: message_start, per block content_block_start / content_block_delta (text_delta or
  input_json_delta) / content_block_stop, message_delta with stop_reason `tool_use` or `end_turn`,
  message_stop. Tool results come back as user `tool_result` blocks (content: a string or text blocks).
- Chat Completions: `data:` chunks of `chat.completion.chunk` (delta.content, delta.tool_calls with an
  index, id and name first, then argument pieces), finish_reason `tool_calls` or `stop`, a usage chunk,
  `data: [DONE]`. Tool results come back as `role: "tool"` messages with `tool_call_id`.
- Responses: response.created, then per output item response.output_item.added / (text:
  content_part.added, output_text.delta, output_text.done, content_part.done; function call:
  function_call_arguments.delta/.done) / response.output_item.done, then response.completed with the
  full output and usage. Tool results come back as `function_call_output` input items by `call_id`.
- Gemini: `data:` chunks each holding one candidate part (text, or functionCall with a
  thoughtSignature), the last with finishReason STOP and usageMetadata. Tool results come back as
  user `functionResponse` parts.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Script = Callable[[dict[str, Any]], list[dict[str, Any]]]
Block = dict[str, Any]


# ---------------------------------------------------------------- reading a request of any API

def api_of(request: dict[str, Any]) -> str:
    """"anthropic", "chat", "responses" or "gemini", from the request's shape."""
    if "contents" in request:
        return "gemini"
    if "input" in request:
        return "responses"
    messages = request.get("messages") or []
    if "system" in request or any(isinstance(m.get("content"), list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_result", "tool_use") for b in m["content"])
            for m in messages):
        return "anthropic"
    if any(m.get("role") in ("system", "tool") or "tool_calls" in m for m in messages):
        return "chat"
    tools = request.get("tools") or []
    return "chat" if any("function" in t for t in tools) else "anthropic"


def _namespaced(request: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Codex's deferred MCP tools, exposed by its client-run tool_search: `namespace__name` →
    (namespace, name), from the tool_search_output items of the request's input."""
    found = {}
    items = request.get("input") if isinstance(request.get("input"), list) else []
    for item in items:
        if item.get("type") != "tool_search_output":
            continue
        for space in item.get("tools") or []:
            for tool in space.get("tools") or []:
                found[f"{space.get('name')}__{tool.get('name')}"] = (space.get("name"), tool.get("name"))
    return found


def tool_names(request: dict[str, Any]) -> list[str]:
    names = list(_namespaced(request))
    for tool in request.get("tools") or []:
        if "functionDeclarations" in tool:
            names += [f.get("name", "") for f in tool["functionDeclarations"] or []]
        elif isinstance(tool.get("function"), dict):
            names.append(tool["function"].get("name", ""))
        elif tool.get("name"):
            names.append(tool["name"])
    return names


def resolve(request: dict[str, Any], name: str) -> str:
    """`name` if the request offers it, else the one offered tool whose name ends with `_name`."""
    offered = tool_names(request)
    if name in offered:
        return name
    matches = [n for n in offered if n.endswith(("_" + name, "-" + name))]  # Copilot CLI: mcp-memory-recall
    return matches[0] if len(matches) == 1 else name


def can_call(request: dict[str, Any], name: str) -> bool:
    """Whether the agent offers `name` (by suffix), or a tool_search that may find it (Codex)."""
    return resolve(request, name) in tool_names(request) or _searches(request) is not None


def result_json(text: str) -> Any:
    """A tool result's JSON document. Codex prefixes MCP results with "Wall time: … Output:", Gemini
    CLI wraps them in <untrusted_context>, and some agents pass the MCP content blocks on as they are
    ([{"type": "text", "text": "{…}"}])."""
    text = text.strip()
    try:
        doc = json.loads(text)
    except ValueError:
        start = min(i for i in (text.find("{"), text.find("[")) if i >= 0)
        doc, _ = json.JSONDecoder().raw_decode(text[start:])
    if isinstance(doc, list) and doc and all(isinstance(b, dict) and "text" in b for b in doc):
        return result_json("".join(b["text"] for b in doc))
    return doc


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text(b.get("text", "") if isinstance(b, dict) else b) for b in content)
    return "" if content is None else json.dumps(content)


def _gemini_result_text(response: Any) -> str:
    if isinstance(response, dict):
        for key in ("output", "content", "result"):
            if key in response:
                value = response[key]
                return value if isinstance(value, str) else _text(value)
        if "error" in response:
            return _text(response["error"])
    return json.dumps(response)


def transcript(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The conversation as the model received it, in order, as (kind, text) pairs: kind is "user",
    "assistant", "tool_call" (text: name + " " + JSON arguments) or "tool_result"."""
    api = api_of(request)
    out: list[tuple[str, str]] = []
    if api == "gemini":
        for content in request.get("contents") or []:
            for part in content.get("parts") or []:
                if "functionCall" in part:
                    call = part["functionCall"]
                    out.append(("tool_call", f"{call.get('name')} {json.dumps(call.get('args') or {})}"))
                elif "functionResponse" in part:
                    out.append(("tool_result", _gemini_result_text(part["functionResponse"].get("response"))))
                elif "text" in part and not part.get("thought"):
                    out.append(("user" if content.get("role") == "user" else "assistant", part["text"]))
        return out
    if api == "responses":
        items = request.get("input")
        for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or []:
            kind = item.get("type", "message")
            if kind == "message" and item.get("role") in ("user", "assistant"):
                out.append((item["role"], _text(item.get("content"))))
            elif kind in ("function_call", "custom_tool_call"):
                out.append(("tool_call", f"{item.get('name')} {item.get('arguments') or item.get('input') or ''}"))
            elif kind == "local_shell_call":
                out.append(("tool_call", f"local_shell {json.dumps(item.get('action'))}"))
            elif kind.endswith("_call_output"):
                output = item.get("output")
                out.append(("tool_result", output if isinstance(output, str) else _text(output)))
        return out
    for message in request.get("messages") or []:
        role, content = message.get("role"), message.get("content")
        if api == "chat":
            if role == "tool":
                out.append(("tool_result", _text(content)))
                continue
            if role in ("user", "assistant") and _text(content):
                out.append((role, _text(content)))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                out.append(("tool_call", f"{function.get('name')} {function.get('arguments') or ''}"))
            continue
        if isinstance(content, str):
            out.append((role, content))
            continue
        for block in content or []:
            kind = block.get("type")
            if kind == "text":
                out.append((role, block.get("text", "")))
            elif kind == "tool_use":
                out.append(("tool_call", f"{block.get('name')} {json.dumps(block.get('input') or {})}"))
            elif kind == "tool_result":
                out.append(("tool_result", _text(block.get("content"))))
    return out


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool result of the request, in order: {"tool_use_id", "name", "text", "is_error"}."""
    api = api_of(request)
    found: list[dict[str, Any]] = []
    if api == "gemini":
        for content in request.get("contents") or []:
            for part in content.get("parts") or []:
                if "functionResponse" in part:
                    response = part["functionResponse"]
                    body = response.get("response")
                    found.append({"tool_use_id": response.get("id"), "name": response.get("name"),
                                  "text": _gemini_result_text(body),
                                  "is_error": isinstance(body, dict) and "error" in body})
        return found
    if api == "responses":
        items = request.get("input") if isinstance(request.get("input"), list) else []
        names = {i.get("call_id"): "__".join(filter(None, (i.get("namespace"), i.get("name"))))
                 for i in items if i.get("type") == "function_call"}
        for item in items:
            if item.get("type") == "function_call_output":
                output = item.get("output")
                found.append({"tool_use_id": item.get("call_id"), "name": names.get(item.get("call_id")),
                              "text": output if isinstance(output, str) else _text(output), "is_error": False})
        return found
    if api == "chat":
        messages = request.get("messages") or []
        names = {c.get("id"): (c.get("function") or {}).get("name")
                 for m in messages for c in m.get("tool_calls") or []}
        return [{"tool_use_id": m.get("tool_call_id"), "name": names.get(m.get("tool_call_id")),
                 "text": _text(m.get("content")), "is_error": False}
                for m in messages if m.get("role") == "tool"]
    names = {}
    for message in request.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                names[block.get("id")] = block.get("name")
            if message.get("role") == "user" and block.get("type") == "tool_result":
                found.append({"tool_use_id": block.get("tool_use_id"), "name": names.get(block.get("tool_use_id")),
                              "text": _text(block.get("content")), "is_error": bool(block.get("is_error"))})
    return found


def _searches(request: dict[str, Any]) -> int | None:
    """How many tool_search calls the request's input holds; None when it offers no tool_search."""
    if not any(t.get("type") == "tool_search" for t in request.get("tools") or []):
        return None
    items = request.get("input") if isinstance(request.get("input"), list) else []
    return sum(1 for i in items if i.get("type") == "tool_search_call")


# ---------------------------------------------------------------- the server

class ScriptedModel:
    """`with ScriptedModel(script) as model:` serves on model.url until the block ends. GETs under
    /npm/ answer 404 at once (OpenCode looks up its plugin package at every start)."""

    def __init__(self, script: Script, *, toolless: bool = False) -> None:
        self.script = script
        self.toolless = toolless  # the script answers requests without tools too (Aider sends none)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
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
            return [r for r in self.requests if r.get("tools") and tool_names(r)]

    def _record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)

    def reply(self, body: dict[str, Any]) -> list[Block]:
        if not tool_names(body) and not self.toolless:
            return [{"type": "text", "text": "Scripted title"}]
        blocks = []
        namespaced = _namespaced(body)
        for block in self.script(body):
            if block["type"] == "tool_use":
                name = resolve(body, block["name"])
                if name not in tool_names(body) and _searches(body) is not None:
                    return [self._search(body, block["name"])]
                block = dict(block, name=name, id=f"call_{uuid.uuid4().hex[:20]}")
                if name in namespaced:
                    block["namespace"], block["name"] = namespaced[name]
            blocks.append(block)
        return blocks

    @staticmethod
    def _search(body: dict[str, Any], name: str) -> Block:
        """Codex defers MCP tools behind its tool_search, and registers them only once the server has
        started: search again (a second apart) until the tool shows up."""
        searches = _searches(body) or 0
        if searches >= 30:
            raise RuntimeError(f"tool {name} never showed up in tool_search")
        if searches:
            time.sleep(1)
        return {"type": "tool_search", "query": name}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends when the connection closes: no chunking

            def log_message(self, *args: object) -> None:
                return None

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path.startswith("/npm/"):
                    return self._json({"error": "not found"}, 404)
                if "v1beta" in path:
                    return self._json({"models": []})
                self._json({"object": "list", "data": [], "has_more": False})

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
                if path.endswith(":countTokens"):
                    return self._json({"totalTokens": 100})
                gemini = re.search(r"/models/([^/:]+):(streamGenerateContent|generateContent)$", path)
                if gemini:
                    return self._gemini(body, gemini.group(1), gemini.group(2) == "streamGenerateContent")
                if path.endswith("/messages"):
                    return self._anthropic(body)
                if path.endswith("/chat/completions"):
                    return self._chat(body)
                if path.endswith("/responses"):
                    return self._responses(body)
                self._json({})

            def _anthropic(self, body: dict[str, Any]) -> None:
                model._record(body)
                blocks = model.reply(body)
                stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                if body.get("stream"):
                    return self._sse(f"event: {e}\ndata: {json.dumps(d)}\n\n"
                                     for e, d in _anthropic_events(body.get("model", "scripted"), blocks, stop))
                content = [dict(b, id=b["id"]) if b["type"] == "tool_use" else b for b in blocks]
                self._json({"id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant",
                            "model": body.get("model", "scripted"), "content": content, "stop_reason": stop,
                            "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 20}})

            def _chat(self, body: dict[str, Any]) -> None:
                model._record(body)
                blocks = model.reply(body)
                chunks = _chat_chunks(body.get("model", "scripted"), blocks)
                if not body.get("stream"):
                    return self._json(_chat_document(body.get("model", "scripted"), blocks))
                self._sse([*(f"data: {json.dumps(c)}\n\n" for c in chunks), "data: [DONE]\n\n"])

            def _responses(self, body: dict[str, Any]) -> None:
                model._record(body)
                self._sse(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n"
                          for e in _responses_events(body.get("model", "scripted"), model.reply(body)))

            def _gemini(self, body: dict[str, Any], name: str, stream: bool) -> None:
                model._record(body)
                config = body.get("generationConfig") or {}
                schema = config.get("responseJsonSchema") or config.get("responseSchema")
                if not tool_names(body) and (schema or config.get("responseMimeType") == "application/json"):
                    parts = [{"text": json.dumps(_json_for(schema or {}))}]
                else:
                    parts = [{"text": b["text"]} if b["type"] == "text" else
                             {"functionCall": {"name": b["name"], "args": b["input"]},
                              "thoughtSignature": "c2NyaXB0ZWQ="} for b in model.reply(body)]
                documents = [{"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}],
                              "modelVersion": name} for part in parts]
                documents[-1]["candidates"][0]["finishReason"] = "STOP"
                documents[-1]["usageMetadata"] = {"promptTokenCount": 100, "candidatesTokenCount": 20,
                                                  "totalTokenCount": 120}
                if not stream:
                    whole = {**documents[-1], "candidates": [{"content": {"role": "model", "parts": parts},
                                                              "finishReason": "STOP", "index": 0}]}
                    return self._json(whole)
                self._sse(f"data: {json.dumps(d)}\r\n\r\n" for d in documents)

            def _json(self, doc: dict[str, Any], status: int = 200) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, pieces) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for piece in pieces:
                    self.wfile.write(piece.encode())
                    self.wfile.flush()
                    time.sleep(0.001)
                self.close_connection = True

        return Handler


def _json_for(schema: dict[str, Any]) -> Any:
    """A value of the schema's shape; Gemini CLI's next-speaker check gets "user"."""
    properties = schema.get("properties") or {}
    if "next_speaker" in properties:
        return {"reasoning": "The answer is complete.", "next_speaker": "user"}
    kind = str(schema.get("type", "string")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        return {key: _json_for(value) for key, value in properties.items()}
    return {"array": [], "number": 0, "integer": 0, "boolean": False}.get(kind, "scripted")


def _anthropic_events(model: str, blocks: list[Block], stop: str) -> Iterator[tuple[str, dict[str, Any]]]:
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


def _chat_calls(blocks: list[Block]) -> list[dict[str, Any]]:
    return [{"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
            for b in blocks if b["type"] == "tool_use"]


def _chat_document(model: str, blocks: list[Block]) -> dict[str, Any]:
    calls = _chat_calls(blocks)
    message: dict[str, Any] = {"role": "assistant",
                               "content": "".join(b["text"] for b in blocks if b["type"] == "text") or None}
    if calls:
        message["tool_calls"] = calls
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:20]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message,
                                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}


def _chat_chunks(model: str, blocks: list[Block]) -> list[dict[str, Any]]:
    head = {"id": f"chatcmpl-{uuid.uuid4().hex[:20]}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    calls = _chat_calls(blocks)
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": b["text"]} for b in blocks if b["type"] == "text"]
    for index, call in enumerate(calls):
        deltas.append({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                       "function": {"name": call["function"]["name"], "arguments": ""}}]})
        deltas.append({"tool_calls": [{"index": index, "function": {"arguments": call["function"]["arguments"]}}]})
    chunks = [{**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}]})
    chunks.append({**head, "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
    return chunks


def _responses_events(model: str, blocks: list[Block]) -> Iterator[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in blocks:
        if block["type"] == "tool_search":  # Codex's client-run search over its deferred (MCP) tools
            items.append({"type": "tool_search_call", "id": f"ts_{uuid.uuid4().hex[:20]}",
                          "call_id": f"call_{uuid.uuid4().hex[:20]}", "execution": "client",
                          "status": "completed", "arguments": {"query": block["query"], "limit": 20}})
        elif block["type"] == "text":
            items.append({"type": "message", "id": f"msg_{uuid.uuid4().hex[:20]}", "role": "assistant",
                          "status": "completed",
                          "content": [{"type": "output_text", "text": block["text"], "annotations": []}]})
        else:
            items.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:20]}", "call_id": block["id"],
                          "name": block["name"], "arguments": json.dumps(block["input"]), "status": "completed",
                          **({"namespace": block["namespace"]} if "namespace" in block else {})})
    response = {"id": f"resp_{uuid.uuid4().hex[:20]}", "object": "response", "created_at": int(time.time()),
                "model": model, "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": response},
                                    {"type": "response.in_progress", "response": response}]
    for index, item in enumerate(items):
        if item["type"] == "tool_search_call":
            events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        elif item["type"] == "message":
            text = item["content"][0]["text"]
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            events += [
                {"type": "response.output_item.added", "output_index": index,
                 "item": {**item, "content": [], "status": "in_progress"}},
                {"type": "response.content_part.added", **where,
                 "part": {"type": "output_text", "text": "", "annotations": []}},
                {"type": "response.output_text.delta", **where, "delta": text},
                {"type": "response.output_text.done", **where, "text": text},
                {"type": "response.content_part.done", **where, "part": item["content"][0]},
            ]
        else:
            where = {"item_id": item["id"], "output_index": index}
            events += [
                {"type": "response.output_item.added", "output_index": index, "item": {**item, "arguments": ""}},
                {"type": "response.function_call_arguments.delta", **where, "delta": item["arguments"]},
                {"type": "response.function_call_arguments.done", **where, "arguments": item["arguments"]},
            ]
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 20,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120}
    events.append({"type": "response.completed", "response": {**response, "status": "completed",
                                                               "output": items, "usage": usage}})
    for number, event in enumerate(events):
        event["sequence_number"] = number
        yield event
