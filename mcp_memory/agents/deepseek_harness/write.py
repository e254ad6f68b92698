"""Writing DeepSeek harness session logs: native lines verbatim, everything else synthesized.

Format facts as in adapter.py and README.md in this package (deepseek-harness b150a551). A synthesized log has a version-0
header, contiguous `seq` numbers, balanced `turn/*` and `step/*` brackets, a `request/header` before
the first model step, and `source.provider` / `source.model` on every assistant message, which dsh's
seed/load validation requires (README.md in this package, §Resumable files; whether a hand-written
log passes every invariant check of a real dsh build is unconfirmed).
"""

from __future__ import annotations

import json
from typing import Any

from ...schema import MessageIn
from ..base import MappingReport, NeutralSession, WriteOptions, epoch_ms
from ..openai_chat.adapter import report_unwritten
from . import NAME
from .events import CHUNK_ROWS, dsh_uuid

PROVIDER_FALLBACK = "imported"


def render_log(
    session: NeutralSession, *, options: WriteOptions, report: MappingReport
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Neutral session → (header, event lines): native lines verbatim, the rest synthesized."""
    header = _header(session, options=options, report=report)
    writer = _LogWriter(session=session, report=report, start_ms=header.get("createdAt") or 0)
    if session.agent == NAME:
        writer.native((session.meta.get("native") or {}).get("events") or [])
    for message in session.messages:
        native = message.metadata.get("native")
        if message.metadata.get("agent_source") == NAME and isinstance(native, dict) and "events" in native:
            writer.native(native["events"] + native.get("after", []))
        else:
            writer.message(message)
    writer.finish()
    return header, writer.lines


def _header(session: NeutralSession, *, options: WriteOptions, report: MappingReport) -> dict[str, Any]:
    cwd = str(options.cwd) if options.cwd else session.meta.get("cwd")
    native = (session.meta.get("native") or {}).get("header") if session.agent == NAME else None
    if native:
        if cwd and native.get("cwd") != cwd:
            report.transform("session cwd (header rewritten for the target project)")
            return {**native, "cwd": cwd}
        return dict(native)
    report.synthesize("session header (new dsh session id)")
    created = session.meta.get("created_at") or (session.messages[0].created_at if session.messages else None)
    header: dict[str, Any] = {
        "type": "session",
        "version": 0,
        "id": dsh_uuid(NAME, session.agent, session.native_id),
        "createdAt": epoch_ms(created) or 0,
    }
    if cwd:
        header["cwd"] = cwd
    header["delegationDepth"] = 0
    if not header["createdAt"]:
        report.synthesize("createdAt and event times 0 (the source has no timestamps)")
    return header


class _LogWriter:
    """Appends events with contiguous seq numbers and balanced turn/step brackets."""

    def __init__(self, *, session: NeutralSession, report: MappingReport, start_ms: int) -> None:
        self.session = session
        self.report = report
        self.lines: list[dict[str, Any]] = []
        self.next_seq = 0
        self.time_ms = start_ms
        self.turn = self.step = 0
        self.turn_open = self.step_open = self.step_has_assistant = self.has_request_header = False
        self.synthesized = False

    def native(self, lines: list[dict[str, Any]]) -> None:
        for line in lines:
            self._track(line)
            self.lines.append(line)

    def _track(self, line: dict[str, Any]) -> None:
        kind, data = line.get("type"), line.get("data") or {}
        seq = line.get("seq", line.get("seq0"))
        span = (
            len(data.get("dt") or data.get("texts") or data.get("args") or [0]) if kind in CHUNK_ROWS else 1
        )
        self.next_seq = seq + span if isinstance(seq, int) else self.next_seq + span
        self.time_ms = line.get("time") or line.get("time0") or self.time_ms
        if kind == "turn/start":
            self.turn, self.turn_open, self.step = data.get("turn", self.turn + 1), True, 0
        elif kind == "turn/end":
            self.turn_open = False
        elif kind == "step/start":
            self.step, self.step_open, self.step_has_assistant = data.get("step", self.step + 1), True, False
        elif kind == "step/end":
            self.step_open = False
        elif kind == "assistant/message":
            self.step_has_assistant = True
        elif kind == "request/header":
            self.has_request_header = True

    def _emit(self, kind: str, data: dict[str, Any], **extra: Any) -> None:
        line = {"type": kind, "seq": self.next_seq, "time": self.time_ms, "data": data, **extra}
        self._track(line)
        self.lines.append(line)

    def _open_turn(self) -> None:
        self._close_turn()
        self._emit("turn/start", {"turn": self.turn + 1})
        self._emit("step/start", {"turn": self.turn, "step": 1})

    def _close_turn(self) -> None:
        if self.step_open:
            self._emit("step/end", {"turn": self.turn, "step": self.step})
        if self.turn_open:
            self._emit("turn/end", {"turn": self.turn, "reason": {"kind": "completed"}})

    def finish(self) -> None:
        if self.synthesized:
            self._close_turn()

    def message(self, message: MessageIn) -> None:
        self.synthesized = True
        if message.created_at is not None:
            self.time_ms = epoch_ms(message.created_at) or self.time_ms
        message_id = dsh_uuid(NAME, message.append_id or json.dumps(message.payload(), sort_keys=True))
        report_unwritten(message, report=self.report, keeps_times=True)
        if message.role == "user" or not self.turn_open:
            self._open_turn()
        if message.role in ("user", "system"):
            self._user(message, message_id)
        elif message.role == "assistant":
            self._assistant(message, message_id)
        else:
            self._tool(message, message_id)

    def _user(self, message: MessageIn, message_id: str) -> None:
        source: dict[str, Any] = {"kind": "user"}
        if message.role == "system":
            source = {"kind": "plugin", "plugin": "mcp-memory", "form": "system"}
            self.report.transform("system message → plugin-injected user message")
        blocks = _content_blocks(message.content, self.report)
        self._emit(
            "user/message",
            {"content": blocks, "source": source, "role": "user", "id": message_id},
            surfaceOp="append",
        )
        self._request_header(message)

    def _request_header(self, message: MessageIn) -> None:
        if self.has_request_header:
            return
        provider, model = self._provider_model(message)
        self.report.synthesize("request/header event (provider, model; empty system prompt and tool list)")
        config = {"provider": provider, "model": model}
        self._emit(
            "request/header", {"header": {"config": config, "system": "", "tools": []}, "reason": "initial"}
        )

    def _provider_model(self, message: MessageIn) -> tuple[str, str]:
        provider = message.metadata.get("provider") if message.metadata.get("agent_source") == NAME else None
        model = message.metadata.get("model") or self.session.meta.get("model") or "unknown"
        if not provider:
            self.report.synthesize(f"assistant source.provider '{PROVIDER_FALLBACK}'")
        return provider or PROVIDER_FALLBACK, model

    def _assistant(self, message: MessageIn, message_id: str) -> None:
        if self.step_has_assistant:
            self._emit("step/end", {"turn": self.turn, "step": self.step})
            self._emit("step/start", {"turn": self.turn, "step": self.step + 1})
        self._request_header(message)
        provider, model = self._provider_model(message)
        blocks = _thinking_blocks(message, self.report) + _content_blocks(message.content, self.report)
        calls = [
            {"type": "tool-call", "id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in message.tool_calls or []
        ]
        body = {
            "role": "assistant",
            "content": blocks + calls,
            "source": {"kind": "model", "provider": provider, "model": model},
            "id": message_id,
        }
        self._emit(
            "assistant/message", {"turn": self.turn, "step": self.step, "message": body}, surfaceOp="append"
        )
        for call in calls:
            self._emit(
                "tool/call",
                {
                    "turn": self.turn,
                    "step": self.step,
                    "callId": call["id"],
                    "name": call["name"],
                    "arguments": call["arguments"],
                },
            )

    def _tool(self, message: MessageIn, message_id: str) -> None:
        call_id = str(message.tool_call_id)
        result = {
            "type": "tool-result",
            "toolCallId": call_id,
            "content": _content_blocks(message.content, self.report),
            "isError": bool(message.metadata.get("is_error")),
        }
        body = {
            "source": {"kind": "tool", "callId": call_id},
            "content": [result],
            "role": "user",
            "id": message_id,
        }
        self._emit("tool/result", {"turn": self.turn, "step": self.step, "message": body}, surfaceOp="append")


def _thinking_blocks(message: MessageIn, report: MappingReport) -> list[dict[str, Any]]:
    thinking = message.thinking
    if thinking is None or not thinking.content:
        return []
    if thinking.encrypted:
        report.drop("encrypted thinking (dsh reasoning blocks hold plain text)")
        return []
    if thinking.signature:
        report.drop("thinking signature")
    return [{"type": "reasoning", "text": thinking.content}]


def _content_blocks(content: Any, report: MappingReport) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = []
    for part in content:
        data = part.model_dump(mode="json")
        if data["type"] == "text":
            blocks.append({"type": "text", "text": data["text"]})
        elif data["type"] == "image" and "attachment" in data:
            blocks.append(data)
        else:
            report.drop(f"content part {data['type']} (dsh stores images as attachments)")
    return blocks

