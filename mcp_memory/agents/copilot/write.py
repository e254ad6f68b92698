"""Neutral session → Copilot CLI events.jsonl and workspace.yaml.

Messages read from Copilot are written back as the events they came from (with the events kept
before them, and the session's tail). Other agents' messages become the events Copilot 1.0.102
rebuilds its model history from on `--resume` (checked: tests/interop/test_copilot_interop.py):
`user.message`, `assistant.message` (content, `toolRequests` with object arguments, `reasoningText`)
and, per result, `tool.execution_complete` (a call without one gets a short synthesised result). Copilot writes its own system
prompt at every start, so no system message is written; scaffolding never is (the export leaves it
out before). Event ids derive from the session id and the message, so a second write is identical.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from ...schema import MessageIn, NeutralSession
from ..base import MappingReport, WriteOptions, plain_text
from . import NAME

NAMESPACE = uuid.UUID("3c7a0e52-8f0b-5d2c-a1e4-6b9d0c7f2e13")
COPILOT_VERSION = "1.0.102"  # the version whose files these are written like


def is_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def session_uuid(session: NeutralSession) -> str:
    """A Copilot session keeps its id (a lossless round trip); another agent's gets one derived from it."""
    if session.agent == NAME and is_uuid(session.native_id):
        return session.native_id
    return str(uuid.uuid5(NAMESPACE, f"{session.agent}\x1f{session.native_id}"))


def stamp(value: datetime | None) -> str:
    when = (value or datetime.now(UTC)).astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


class EventWriter:
    """One session's events, in order, each chained to the one before (`parentId`)."""

    def __init__(self, session: NeutralSession, session_id: str, options: WriteOptions, report: MappingReport):
        self.session, self.session_id, self.options, self.report = session, session_id, options, report
        self.events: list[dict[str, Any]] = []
        self.answered = {m.tool_call_id for m in session.messages if m.role == "tool" and m.tool_call_id}
        self.called: set[str] = set()

    def render(self) -> list[dict[str, Any]]:
        messages = self.session.messages
        for index, message in enumerate(messages):
            native = self._native(message)
            if native is not None:
                if index == 0 and not any(e.get("type") == "session.start" for e in native):
                    self._start(message.created_at)
                self.events.extend(self._own(native))
                continue
            if not self.events:
                self._start(message.created_at)
            self._foreign(message, index)
        if not self.events:
            self._start(None)
        tail = (self.session.meta.get("native") or {}).get("tail") if self.session.agent == NAME else None
        if isinstance(tail, list):
            self.events.extend(self._own([e for e in tail if isinstance(e, dict)]))
        return self.events

    def _native(self, message: MessageIn) -> list[dict[str, Any]] | None:
        native = message.metadata.get("native")
        if message.metadata.get("agent_source") != NAME or not isinstance(native, dict):
            return None
        event = native.get("event")
        if not isinstance(event, dict):
            return None
        before = [e for e in native.get("before") or [] if isinstance(e, dict)]
        return [*before, event]

    def _own(self, events: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Copilot's own events as they were; the start event names the session being written."""
        for event in events:
            if event.get("type") == "session.start" and isinstance(event.get("data"), dict):
                event = {**event, "data": {**event["data"], "sessionId": self.session_id}}
            yield event

    def _add(self, kind: str, data: dict[str, Any], key: str, when: datetime | None) -> None:
        self.events.append({"type": kind, "data": data, "id": str(uuid.uuid5(NAMESPACE, f"{self.session_id}\x1f{key}")),
                            "timestamp": stamp(when), "parentId": self.events[-1]["id"] if self.events else None})

    def _start(self, when: datetime | None) -> None:
        cwd = self.options.cwd or self.session.meta.get("cwd")
        data: dict[str, Any] = {"sessionId": self.session_id, "version": 1, "producer": "copilot-agent",
                                "copilotVersion": COPILOT_VERSION, "startTime": stamp(when),
                                "context": {"cwd": str(cwd)} if cwd else {}}
        self._add("session.start", data, "start", when)
        self.report.synthesize("session.start event")

    def _foreign(self, message: MessageIn, index: int) -> None:
        key = message.append_id or str(index)
        if message.role == "system":
            self.report.drop("system message (Copilot writes its own system prompt)")
        elif message.role == "user":
            self._user(message, key)
        elif message.role == "assistant":
            self._assistant(message, key)
        else:
            self._tool(message, key)

    def _user(self, message: MessageIn, key: str) -> None:
        if isinstance(message.content, list) and any(p.type != "text" for p in message.content):
            self.report.drop("non-text user content part (Copilot events hold text)")
        text = plain_text(message.content)
        self._add("user.message", {"content": text, "messageId": _mid(self.session_id, key)}, key, message.created_at)

    def _assistant(self, message: MessageIn, key: str) -> None:
        requests = []
        for call in message.tool_calls or []:
            requests.append({"toolCallId": call.id, "name": call.function.name, "type": "function",
                             "arguments": _arguments(call.function.arguments, self.report)})
            self.called.add(call.id)
        data: dict[str, Any] = {"messageId": _mid(self.session_id, key), "content": plain_text(message.content),
                                "toolRequests": requests}
        thinking = message.thinking
        if thinking is not None and thinking.content and not thinking.encrypted:
            data["reasoningText"] = thinking.content
        elif thinking is not None and thinking.content:
            self.report.drop("encrypted thinking (Copilot keeps reasoning as plain text)")
        if isinstance(message.metadata.get("model"), str):
            data["model"] = message.metadata["model"]
        self._add("assistant.message", data, key, message.created_at)
        for call in message.tool_calls or []:
            if call.id not in self.answered:
                self._result(call.id, "(no result was recorded for this call)", f"{key}:{call.id}", message.created_at)
                self.report.synthesize("tool result for a tool call that has none")

    def _tool(self, message: MessageIn, key: str) -> None:
        call = message.tool_call_id
        if not call or call not in self.called:
            self.report.drop("tool result without its tool call")
            return
        self._result(call, plain_text(message.content), key, message.created_at)

    def _result(self, call: str, text: str, key: str, when: datetime | None) -> None:
        self._add("tool.execution_complete", {"toolCallId": call, "success": True, "result": {"content": text}},
                  key, when)


def _mid(session_id: str, key: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{session_id}\x1fmessage\x1f{key}"))


def _arguments(text: str, report: MappingReport) -> dict[str, Any]:
    """Copilot keeps tool arguments as a JSON object; anything else is wrapped (and reported)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    report.transform("tool call arguments that are not a JSON object wrapped as {\"input\": …}")
    return {"input": text if value is None else value}


def workspace_yaml(session_id: str, cwd: str | None, title: str | None, created: str, updated: str) -> str:
    """workspace.yaml as Copilot writes it (flat `key: value`; values JSON-quoted, which YAML reads)."""
    lines = {"id": session_id, "cwd": cwd, "client_name": "github/cli", "name": title,
             "user_named": False, "summary_count": 0, "fork_count": 0, "created_at": created, "updated_at": updated}
    return "".join(f"{key}: {json.dumps(value, ensure_ascii=False)}\n" for key, value in lines.items() if value is not None)
