"""Copilot CLI events → neutral messages, from the start of events.jsonl or from a capture cursor.

events.jsonl is append-only (a resume appends `session.resume` and the new turn), one event per
line: `{type, data, id, timestamp, parentId}`. Four types carry the conversation (README.md,
§Events): `user.message`, `system.message` (Copilot's own system prompt: scaffolding),
`assistant.message` (text, `toolRequests`, `reasoningText`) and `tool.execution_complete` (a tool
result). Every other event is kept with the message that follows it (`metadata.native.before`);
those after the last message stay in the cursor until a message comes, and a full read puts them in
the session meta (`native.tail`), so that a session read from Copilot is written back event for event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...schema import MessageIn
from ..base import MappingReport, parse_time, stable_id
from . import NAME

MESSAGE_EVENTS = frozenset({"user.message", "system.message", "assistant.message", "tool.execution_complete"})
KNOWN_EVENTS = MESSAGE_EVENTS | {
    "session.start", "session.resume", "session.shutdown", "session.usage_record", "session.model_change",
    "session.info", "session.error", "session.truncation", "session.compaction_start",
    "session.compaction_complete", "assistant.turn_start", "assistant.turn_end", "assistant.intent",
    "tool.execution_start", "tool.execution_partial_result", "tool.user_requested", "hook.start", "hook.end",
    "subagent.started", "subagent.completed", "abort",
}


@dataclass
class ReadState:
    """What a read has seen so far; JSON-able (`to_cursor`), so that a capture goes on from it."""

    session_id: str
    offset: int = 0
    before: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    header: dict[str, Any] | None = None

    def to_cursor(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "offset": self.offset, "before": self.before,
                "facts": self.facts, "header": self.header}

    @classmethod
    def from_cursor(cls, cursor: dict[str, Any]) -> ReadState:
        return cls(session_id=str(cursor["session_id"]), offset=int(cursor["offset"]),
                   before=list(cursor.get("before") or []), facts=dict(cursor.get("facts") or {}),
                   header=cursor.get("header"))


def read_events(data: bytes, state: ReadState, report: MappingReport) -> list[MessageIn]:
    """The messages of the complete lines in `data` (the file from `state.offset` on); moves the
    offset past them. A last line without its newline is still being written: it waits."""
    messages: list[MessageIn] = []
    end = data.rfind(b"\n") + 1
    for raw in data[:end].splitlines():
        if not raw.strip():
            continue
        try:
            event = json.loads(raw)
        except ValueError:
            report.drop("undecodable JSON line")
            continue
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            report.drop("line that is not a Copilot event")
            continue
        message = _message(event, state, report)
        if message is not None:
            messages.append(message)
    state.offset += end
    return messages


def _message(event: dict[str, Any], state: ReadState, report: MappingReport) -> MessageIn | None:
    kind = event["type"]
    data: dict[str, Any] = event["data"] if isinstance(event.get("data"), dict) else {}
    if kind == "session.start":
        state.header = event
        if isinstance(data.get("sessionId"), str) and data["sessionId"]:
            state.session_id = data["sessionId"]  # the append ids name the session, whatever the folder
        _note_facts(state, data)
    if kind not in MESSAGE_EVENTS:
        if kind not in KNOWN_EVENTS:
            report.transform(f"unknown event type {kind!r} kept as native only")
        state.before.append(event)
        return None
    native = {"event": event, "before": state.before}
    state.before = []
    fields: dict[str, Any] = {"append_id": stable_id(NAME, state.session_id, event.get("id")),
                              "metadata": {"agent_source": NAME, "native": native},
                              "created_at": parse_time(event.get("timestamp"))}
    if kind == "user.message":
        text = _text(data.get("content"))
        state.facts.setdefault("title", text.strip()[:200] or None)
        fields.update(role="user", content=text)
    elif kind == "system.message":
        fields["metadata"]["scaffold"] = "instructions"
        fields.update(role="system", content=_text(data.get("content")))
    elif kind == "assistant.message":
        fields.update(_assistant(data, fields["metadata"], state, report))
    else:
        fields.update(role="tool", tool_call_id=str(data["toolCallId"]), content=_result_text(data))
    return MessageIn.model_validate(fields)


def _assistant(data: dict[str, Any], metadata: dict[str, Any], state: ReadState,
               report: MappingReport) -> dict[str, Any]:
    calls = []
    for request in data.get("toolRequests") or []:
        arguments = request.get("arguments")
        calls.append({"id": str(request["toolCallId"]), "type": "function", "function": {
            "name": str(request["name"]),
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)}})
    reasoning = data.get("reasoningText")
    thinking = {"content": reasoning, "encrypted": False} if isinstance(reasoning, str) and reasoning else None
    if data.get("reasoningOpaque") or data.get("encryptedContent"):
        report.transform("opaque reasoning kept as native only")
    if isinstance(data.get("model"), str):
        metadata["model"] = state.facts["model"] = data["model"]
    return {"role": "assistant", "content": _text(data.get("content")), "tool_calls": calls or None,
            "thinking": thinking}


def _result_text(data: dict[str, Any]) -> str:
    """A tool result's text; a failed call's error message when it has no result text."""
    result = data.get("result")
    text = _text(result.get("content")) if isinstance(result, dict) else ""
    if not data.get("success", True):
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        text = text or (message if isinstance(message, str) else "the tool failed")
    return text


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content blocks, should a later version write them
        return "\n".join(b.get("text", "") for b in value if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _note_facts(state: ReadState, data: dict[str, Any]) -> None:
    context: dict[str, Any] = data["context"] if isinstance(data.get("context"), dict) else {}
    facts = {"cwd": context.get("cwd"), "model": data.get("selectedModel"), "created_at": data.get("startTime"),
             "copilot_version": data.get("copilotVersion")}
    state.facts.update({k: v for k, v in facts.items() if isinstance(v, str) and v})
