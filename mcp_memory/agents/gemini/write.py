"""Neutral session → Gemini CLI chat file in the current JSONL format (rendering half of the adapter).

Line 1 is the header `{sessionId, projectHash = sha256(project root), startTime, lastUpdated, kind}`,
then one MessageRecord per line, as Gemini CLI 0.61.0 writes them (tests/fixtures/real/gemini). Records
read from Gemini are written back unchanged (`metadata["native"]`, once per record id). Foreign
assistant messages become `gemini` records whose `toolCalls[].result` holds the matching tool message
as a `functionResponse` part, which is what 0.61 replays to the model on resume
(`convertSessionToClientHistory`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...schema import MessageIn
from ..base import MappingReport, NeutralSession, WriteOptions, plain_text, stable_id
from .marks import CONTEXT_PREFIX
from .read import AGENT, parse_time

SETUP_TURN = CONTEXT_PREFIX + "\nThis is the Gemini CLI."  # how 0.61's setup turn starts


def gemini_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def project_hash(cwd: Path | str) -> str:
    return hashlib.sha256(str(cwd).encode()).hexdigest()


def session_uuid(session: NeutralSession) -> str:
    if session.agent == AGENT:
        try:
            return str(uuid.UUID(session.native_id))
        except ValueError:
            pass
    return str(uuid.UUID(hex=stable_id(session.agent, session.native_id), version=4))


def chat_file_name(start: datetime, session_id: str) -> str:
    """`session-<YYYY-MM-DDTHH-MM>-<tag>.jsonl` (the start minute in UTC, as Gemini names them), where
    the 8-character tag is NOT the id's first 8 characters Gemini itself uses. A 0.61 resume in a later
    minute leaves a stub `session-<that minute>-<id[:8]>.jsonl` with nothing to resume; the next start
    deletes the stub together with every `session-*-<id[:8]>.jsonl` of a session other than the running
    one, the resumed chat included. Under another tag the chat stays; the stub still goes."""
    return f"session-{start.astimezone(UTC):%Y-%m-%dT%H-%M}-{file_tag(session_id)}.jsonl"


def file_tag(session_id: str) -> str:
    """The id's last 8 hex digits, or (should they equal its first 8) 8 of its sha256: 8 characters,
    as `gemini --delete-session` needs to find the file, and never `session_id[:8]`."""
    tag, salt = session_id.replace("-", "")[-8:], 0
    while tag == session_id[:8]:
        salt += 1
        tag = hashlib.sha256(f"{salt}:{session_id}".encode()).hexdigest()[:8]
    return tag


def is_native(session: NeutralSession, message: MessageIn) -> bool:
    """A record Gemini wrote, to be written back unchanged: only in a session read from Gemini, never
    from metadata another agent's session carries along."""
    return session.agent == AGENT and message.metadata.get("agent_source") == AGENT and (
        isinstance(message.metadata.get("native"), dict) or "native_part_of" in message.metadata
    )


@dataclass
class ChatWriter:
    session: NeutralSession
    options: WriteOptions
    report: MappingReport
    session_id: str
    records: list[dict[str, Any]] = field(default_factory=list)
    consumed: set[int] = field(default_factory=set)  # indexes of tool messages folded into a toolCall

    def header(self, start: datetime, last: datetime, refresh: bool) -> dict[str, Any]:
        native = self.session.meta.get("native") if self.session.agent == AGENT else None
        header = (
            dict(native["header"])
            if isinstance(native, dict) and isinstance(native.get("header"), dict)
            else {}
        )
        if not header:
            self.report.synthesize("chat header line")
            header = {"startTime": gemini_time(start), "lastUpdated": gemini_time(last), "kind": "main"}
        cwd = self.options.cwd or self.session.meta.get("cwd")
        wanted = project_hash(cwd) if cwd else header.get("projectHash") or project_hash(".")
        if header.get("projectHash") not in (None, wanted) and self.options.cwd is not None:
            self.report.transform("projectHash → sha256 of the target project directory")
            header["projectHash"] = wanted
        header.setdefault("projectHash", wanted)
        header["sessionId"] = self.session_id
        if refresh:
            self.report.transform("lastUpdated → now (Gemini deletes chats older than 30 days on start)")
            header["lastUpdated"] = gemini_time(datetime.now(UTC))
        return {"sessionId": header.pop("sessionId"), "projectHash": header.pop("projectHash"), **header}

    def render(self) -> list[dict[str, Any]]:
        written: set[str] = set()
        for index, message in enumerate(self.session.messages):
            if index in self.consumed:
                continue
            if is_native(self.session, message):
                record = message.metadata.get("native")
                if isinstance(record, dict) and record.get("id") not in written:
                    written.add(str(record.get("id")))
                    self.records.append(record)
                self.records.extend(message.metadata.get("native_after") or [])
                continue
            if is_scaffolding(message):
                self.report.drop("scaffolding of another agent (instructions, environment, notices)")
                continue
            self._foreign(index, message)
        return self.records

    def _foreign(self, index: int, message: MessageIn) -> None:
        when = gemini_time(message.created_at or start_time(self.session))
        record_id = stable_id(self.session.agent, self.session.native_id, message.append_id or index)
        base = {"id": record_id, "timestamp": when}
        if message.role == "user":
            self.records.append(base | {"type": "user", "content": self._parts(message.content)})
        elif message.role == "system":
            self.report.transform("system message → info record (shown, not sent to the model)")
            self.records.append(base | {"type": "info", "content": plain_text(message.content)})
        elif message.role == "assistant":
            self.records.append(base | self._assistant(index, message, when))
        else:
            self.report.transform("tool message without a matching call → user functionResponse record")
            response = {
                "id": message.tool_call_id,
                "name": message.name or "tool",
                "response": {"output": plain_text(message.content)},
            }
            self.records.append(base | {"type": "user", "content": [{"functionResponse": response}]})

    def _assistant(self, index: int, message: MessageIn, when: str) -> dict[str, Any]:
        record: dict[str, Any] = {"type": "gemini", "content": plain_text(message.content)}
        thoughts = self._thoughts(message, when)
        if thoughts:
            record["thoughts"] = thoughts
        if message.tool_calls:
            record["toolCalls"] = [self._tool_call(index, call, when) for call in message.tool_calls]
        model = message.metadata.get("model")
        if isinstance(model, str):
            record["model"] = model
        return record

    def _thoughts(self, message: MessageIn, when: str) -> list[dict[str, Any]]:
        thinking = message.thinking
        if thinking is None or not thinking.content:
            return []
        if thinking.encrypted:
            self.report.drop("encrypted thinking (Gemini keeps readable thought summaries only)")
            return []
        if self.options.thinking == "drop":
            self.report.drop("thinking (thinking policy: drop)")
            return []
        self.report.transform("thinking → thoughts summary")
        return [{"subject": "", "description": thinking.content, "timestamp": when}]

    def _tool_call(self, index: int, call: Any, when: str) -> dict[str, Any]:
        args = json.loads(call.function.arguments)
        if not isinstance(args, dict):
            self.report.transform('tool call arguments that are not an object → {"value": …}')
            args = {"value": args}
        entry = {"id": call.id, "name": call.function.name, "args": args}
        result = self._result_for(index, call.id)
        if result is None:
            self.report.synthesize("error result for a tool call that has none")
            output, status = {"error": "no result was recorded for this call"}, "error"
        else:
            output, status = {"output": plain_text(result.content)}, "success"
        response = {"functionResponse": {"id": call.id, "name": call.function.name, "response": output}}
        return entry | {"result": [response], "status": status, "timestamp": when}

    def _result_for(self, index: int, call_id: str) -> MessageIn | None:
        for later in range(index + 1, len(self.session.messages)):
            message = self.session.messages[later]
            if message.role == "tool" and message.tool_call_id == call_id and later not in self.consumed:
                self.consumed.add(later)
                return message
        return None

    def _parts(self, content: Any) -> list[dict[str, Any]]:
        if not isinstance(content, list):
            return [{"text": content or ""}]
        parts = []
        for part in content:
            data = part.model_dump()
            if data.get("scaffold"):
                self.report.drop(f"scaffolding part ({data['scaffold']})")
                continue
            url = data.get("image_url", {}).get("url", "") if isinstance(data.get("image_url"), dict) else ""
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


def is_scaffolding(message: MessageIn) -> bool:
    """Marked scaffolding, or a Gemini setup turn that reached another agent unmarked: written as a
    turn it would reach the model as if the user had said it."""
    if message.metadata.get("scaffold"):
        return True
    return message.role == "user" and plain_text(message.content).lstrip().startswith(SETUP_TURN)


def start_time(session: NeutralSession) -> datetime:
    native = session.meta.get("native") if session.agent == AGENT else None
    header = native.get("header") if isinstance(native, dict) else None
    when = parse_time(header.get("startTime")) if isinstance(header, dict) else None
    when = when or parse_time(session.meta.get("created_at"))
    when = when or next((m.created_at for m in session.messages if m.created_at), None)
    return when or datetime.now(UTC)


def last_time(session: NeutralSession, start: datetime) -> datetime:
    return max((m.created_at for m in session.messages if m.created_at), default=start)

