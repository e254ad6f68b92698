"""Neutral session → Qwen Code chat records (the rendering half of the adapter).

Qwen Code 0.24.4 resumes a chat by walking `parentUuid` back from the last conversation record, and
lists or loads a file only when its first record's `cwd` is the project's directory and every record
names the same `sessionId` (README.md, §Resumable files). So every record written here is linked to
the one before it, and carries the target session id and directory. Records read from Qwen Code are
written back unchanged otherwise (`metadata["native"]`, once each); messages of other agents become
`user`, `assistant` (role `model`) and `tool_result` records in Qwen Code's own shape.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...schema import MessageIn
from ..base import MappingReport, NeutralSession, WriteOptions, plain_text, stable_id
from .read import AGENT

VERSION = "0.24.4"  # the Qwen Code version whose records these are


def qwen_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def session_uuid(session: NeutralSession) -> str:
    """The session's own id when it is Qwen Code's (a uuid), else a uuid derived from the source."""
    if session.agent == AGENT:
        try:
            return str(uuid.UUID(session.native_id))
        except ValueError:
            pass
    return str(uuid.UUID(hex=stable_id(AGENT, session.agent, session.native_id), version=4))


def is_native(session: NeutralSession, message: MessageIn) -> bool:
    """A record Qwen Code wrote: only from a session read from Qwen Code, never metadata that another
    agent's session carries along."""
    return session.agent == AGENT and message.metadata.get("agent_source") == AGENT and (
        isinstance(message.metadata.get("native"), dict) or "native_part_of" in message.metadata)


@dataclass
class ChatWriter:
    session: NeutralSession
    options: WriteOptions
    report: MappingReport
    session_id: str
    cwd: str
    records: list[dict[str, Any]] = field(default_factory=list)
    uuids: set[str] = field(default_factory=set)
    calls: dict[str, str] = field(default_factory=dict)  # call id → function name
    pending: list[str] = field(default_factory=list)  # call ids still waiting for their result

    def render(self) -> list[dict[str, Any]]:
        for index, message in enumerate(self.session.messages):
            if is_native(self.session, message):
                record = message.metadata.get("native")
                if isinstance(record, dict):
                    self._native(record)
                continue
            if message.metadata.get("scaffold"):
                self.report.drop("scaffolding of another agent (instructions, environment, notices)")
                continue
            self._foreign(index, message)
        self._close_calls()
        return self.records

    def _native(self, record: dict[str, Any]) -> None:
        for part in record.get("message", {}).get("parts", []) if isinstance(record.get("message"), dict) else []:
            call = part.get("functionCall") if isinstance(part, dict) else None
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                self.calls[call["id"]] = str(call.get("name") or "tool")
        fixed = dict(record)
        if fixed.get("sessionId") != self.session_id:
            self.report.transform("sessionId → the written session's id")
            fixed["sessionId"] = self.session_id
        if isinstance(fixed.get("cwd"), str) and fixed["cwd"] != self.cwd:
            self.report.transform("cwd → the target project directory (Qwen Code lists a chat by it)")
            fixed["cwd"] = self.cwd
        if fixed.get("parentUuid") is not None and fixed["parentUuid"] not in self.uuids:
            self.report.transform("parentUuid of a record whose parent was not written → the record before it")
            fixed["parentUuid"] = self.records[-1]["uuid"] if self.records else None
        self._append(fixed)

    def _append(self, record: dict[str, Any]) -> None:
        if record.get("parentUuid") is None and self.records:
            self.report.transform("a second chain root → linked to the record before it")
            record = {**record, "parentUuid": self.records[-1]["uuid"]}
        self.records.append(record)
        self.uuids.add(str(record.get("uuid")))

    def _base(self, index: int, message: MessageIn, kind: str, part: int = 0) -> dict[str, Any]:
        when = message.created_at or self._start()
        record_uuid = str(uuid.UUID(hex=stable_id(self.session_id, message.append_id or index, part), version=4))
        return {"uuid": record_uuid, "parentUuid": self.records[-1]["uuid"] if self.records else None,
                "sessionId": self.session_id, "timestamp": qwen_time(when), "type": kind, "cwd": self.cwd,
                "version": VERSION}

    def _foreign(self, index: int, message: MessageIn) -> None:
        if message.role == "tool":
            self._result(index, message)
            return
        self._close_calls()
        if message.role == "user":
            parts = self._parts(message.content)
            if parts:
                self._append(self._base(index, message, "user") | {"message": {"role": "user", "parts": parts}})
        elif message.role == "assistant":
            self._assistant(index, message)
        else:
            self.report.drop("system message (a Qwen Code chat file holds no system turns)")

    def _assistant(self, index: int, message: MessageIn) -> None:
        parts: list[dict[str, Any]] = []
        thinking = message.thinking
        if thinking is not None and thinking.content:
            if thinking.encrypted:
                self.report.drop("encrypted thinking (Qwen Code keeps readable thought text only)")
            else:
                self.report.transform("thinking → a thought part")
                parts.append({"text": thinking.content, "thought": True})
        text = plain_text(message.content)
        if text:
            parts.append({"text": text})
        for call in message.tool_calls or []:
            parts.append({"functionCall": {"id": call.id, "name": call.function.name, "args": self._args(call)}})
            self.calls[call.id] = call.function.name
            self.pending.append(call.id)
        if not parts:
            self.report.drop("assistant message with nothing to say")
            return
        record = self._base(index, message, "assistant") | {"message": {"role": "model", "parts": parts}}
        model = message.metadata.get("model")
        if isinstance(model, str):
            record["model"] = model
        self._append(record)

    def _args(self, call: Any) -> dict[str, Any]:
        args = json.loads(call.function.arguments)
        if not isinstance(args, dict):
            self.report.transform('tool call arguments that are not an object → {"value": …}')
            args = {"value": args}
        return args

    def _result(self, index: int, message: MessageIn, *, output: dict[str, Any] | None = None) -> None:
        call_id = message.tool_call_id
        if call_id is None or call_id not in self.calls:  # Qwen Code sends a result only after its call
            self.report.transform("tool result without its call → user text record")
            text = f"[result of tool call {call_id or '?'}]\n{plain_text(message.content)}"
            self._append(self._base(index, message, "user") | {"message": {"role": "user", "parts": [{"text": text}]}})
            return
        if call_id in self.pending:
            self.pending.remove(call_id)
        name = self.calls[call_id]
        response = {"id": call_id, "name": name, "response": output or {"output": plain_text(message.content)}}
        status = "error" if output else "success"
        self._append(self._base(index, message, "tool_result", 1 if output else 0) | {
            "message": {"role": "user", "parts": [{"functionResponse": response}]},
            "toolCallResult": {"callId": call_id, "status": status, "resultDisplay": "", "executionStatus": status}})

    def _close_calls(self) -> None:
        """A call the session never answered gets an error result: the model's API wants one per call."""
        for call_id in list(self.pending):
            self.report.synthesize("error result for a tool call that has none")
            stub = MessageIn(role="tool", tool_call_id=call_id, content="", append_id=f"unanswered-{call_id}")
            self._result(len(self.records), stub, output={"error": "no result was recorded for this call"})

    def _parts(self, content: Any) -> list[dict[str, Any]]:
        if not isinstance(content, list):
            return [{"text": content}] if content else []
        parts = []
        for part in content:
            data = part.model_dump()
            if data.get("scaffold"):
                self.report.drop(f"scaffolding part ({data['scaffold']})")
                continue
            image = data.get("image_url")
            url = image.get("url", "") if isinstance(image, dict) else ""
            if part.type == "text":
                parts.append({"text": data["text"]})
            elif part.type == "image_url" and url.startswith("data:") and ";base64," in url:
                mime, payload = url[5:].split(";base64,", 1)
                parts.append({"inlineData": {"mimeType": mime, "data": payload}})
            elif part.type == "gemini_part" and isinstance(data.get("part"), dict):
                parts.append(data["part"])
            else:
                self.report.drop(f"content part {part.type}")
        return parts

    def _start(self) -> datetime:
        found = [m.created_at for m in self.session.messages if m.created_at]
        return min(found) if found else datetime.now(UTC)
