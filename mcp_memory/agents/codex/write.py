"""Neutral session → Codex CLI rollout lines (rendering half of the Codex adapter).

Messages read from Codex carry their own rollout line (`metadata["native"]`) and the non-transcript
lines that preceded it (`metadata["native_before"]`); those are written back unchanged. Messages from
elsewhere become `response_item`s (message / reasoning / function_call / function_call_output) plus the
`event_msg`s (`user_message`, `agent_message`, `agent_reasoning`) that Codex replays into its UI on
resume, following the shapes of codex-rs `protocol` as recorded by Codex CLI 0.169.0
(tests/fixtures/real/codex).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...schema import MessageIn
from ..base import MappingReport, NeutralSession, WriteOptions, plain_text, stable_id
from .read import AGENT, parse_time

CLI_VERSION = "0.169.0"  # the release whose rollouts these lines follow


def session_uuid(session: NeutralSession, start: datetime) -> str:
    """Codex's own id when the session came from Codex, else a UUIDv7 derived from the source id."""
    if session.agent == AGENT and session.native_id:
        try:  # meta is data: only a real UUID names the rollout file
            return str(uuid.UUID(session.native_id))
        except ValueError:
            pass
    digest = int(stable_id(session.agent, session.native_id), 16)
    millis = int(start.timestamp() * 1000) & ((1 << 48) - 1)
    rand_a = (digest >> 64) & 0xFFF
    rand_b = digest & ((1 << 62) - 1)
    return str(uuid.UUID(int=(millis << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b))


def start_time(session: NeutralSession) -> datetime:
    when = parse_time(session.meta.get("created_at"))
    if when is None:
        when = next((m.created_at for m in session.messages if m.created_at), None)
    return when or datetime.now(UTC)


def is_native(message: MessageIn) -> bool:
    return message.metadata.get("agent_source") == AGENT and isinstance(message.metadata.get("native"), dict)


@dataclass
class RolloutWriter:
    session: NeutralSession
    options: WriteOptions
    report: MappingReport
    thread_id: str
    start: datetime
    lines: list[dict[str, Any]] = field(default_factory=list)
    clock: datetime | None = None

    def render(self) -> list[dict[str, Any]]:
        native = self.session.meta.get("native") if self.session.agent == AGENT else None
        native = native if isinstance(native, dict) else {}
        header = native.get("session_meta_line")
        if isinstance(header, dict):
            self.lines.append(self._with_cwd(header))
        else:
            self._header()
        own = self.session.agent == AGENT  # native lines of another agent's session are never replayed
        for message in self.session.messages:
            self.clock = message.created_at or self.clock
            if own and is_native(message):
                self.lines.extend(
                    self._with_cwd(line) for line in message.metadata.get("native_before") or []
                )
                self.lines.append(message.metadata["native"])
            else:
                self._foreign(message)
        self.lines.extend(native.get("trailing") or [])
        return self.lines

    def _with_cwd(self, line: Any) -> Any:
        """A native session_meta / turn_context line, moved to options.cwd when that differs."""
        cwd = self.options.cwd
        payload = line.get("payload") if isinstance(line, dict) else None
        if (
            cwd is None
            or line.get("type") not in ("session_meta", "turn_context")
            or not isinstance(payload, dict)
        ):
            return line
        if payload.get("cwd") in (None, str(cwd)):
            return line
        self.report.transform(f"{line['type']} cwd → the target project directory")
        return {**line, "payload": {**payload, "cwd": str(cwd)}}

    def _stamp(self) -> str:
        return codex_time(self.clock or self.start)

    def _line(self, kind: str, payload: dict[str, Any]) -> None:
        self.lines.append({"timestamp": self._stamp(), "type": kind, "payload": payload})

    def _header(self) -> None:
        meta = self.session.meta
        cwd = str(self.options.cwd or meta.get("cwd") or ".")
        self.clock = self.start
        self._line(
            "session_meta",
            {
                "id": self.thread_id,
                "timestamp": codex_time(self.start),
                "cwd": cwd,
                "originator": "codex_cli_rs",
                "cli_version": CLI_VERSION,
                "source": "cli",
                "model_provider": self.options.extra.get("model_provider", "openai"),
            },
        )
        self.report.synthesize("session_meta line")
        context = {"cwd": cwd, "approval_policy": "on-request", "sandbox_policy": {"type": "read-only"}}
        model = self.options.extra.get("model") or meta.get("model") or "gpt-5.5"
        context |= {"model": model, "summary": "auto"}
        self._line("turn_context", context)
        self.report.synthesize("turn_context line (cwd, model)")

    def _foreign(self, message: MessageIn) -> None:
        if message.metadata.get("scaffold"):  # another agent's injected text is not a turn here
            self.report.drop(f"scaffolding message ({message.metadata['scaffold']}) of another agent")
            return
        if message.role == "system":
            self.report.transform("system message → developer message")
            self._message("developer", message.content)
        elif message.role == "user":
            self._user(message)
        elif message.role == "assistant":
            self._assistant(message)
        else:
            self._tool_output(message)

    def _user(self, message: MessageIn) -> None:
        self._message("user", message.content)
        content = message.content
        if isinstance(content, list):
            content = [part for part in content if not part.model_dump().get("scaffold")]
        self._line("event_msg", {"type": "user_message", "message": plain_text(content), "images": []})
        self.report.synthesize("event_msg user_message (UI replay)")

    def _assistant(self, message: MessageIn) -> None:
        if message.thinking is not None and message.thinking.content:
            self._reasoning(message)
        if message.content:
            self._message("assistant", message.content)
            self._line("event_msg", {"type": "agent_message", "message": plain_text(message.content)})
            self.report.synthesize("event_msg agent_message (UI replay)")
        for call in message.tool_calls or []:
            function = call.function
            payload = {"type": "function_call", "name": function.name, "arguments": function.arguments}
            self._line("response_item", payload | {"call_id": call.id})

    def _reasoning(self, message: MessageIn) -> None:
        thinking = message.thinking
        assert thinking is not None and thinking.content
        if thinking.encrypted:
            self.report.drop("encrypted thinking from another agent (Codex cannot verify it)")
            return
        if self.options.thinking == "drop":
            self.report.drop("thinking (thinking policy: drop)")
            return
        summary = [{"type": "summary_text", "text": thinking.content}]
        self._line(
            "response_item",
            {"type": "reasoning", "summary": summary, "content": None, "encrypted_content": None},
        )
        self._line("event_msg", {"type": "agent_reasoning", "text": thinking.content})
        self.report.transform("thinking → reasoning summary without encrypted_content")

    def _tool_output(self, message: MessageIn) -> None:
        payload = {
            "type": "function_call_output",
            "call_id": message.tool_call_id,
            "output": plain_text(message.content),
        }
        if isinstance(message.content, list) and any(p.type != "text" for p in message.content):
            self.report.drop("non-text part of a tool result")
        self._line("response_item", payload)

    def _message(self, role: str, content: Any) -> None:
        kind = "output_text" if role == "assistant" else "input_text"
        parts = []
        for part in content if isinstance(content, list) else [content or ""]:
            parts.extend(self._part(part, kind))
        self._line("response_item", {"type": "message", "role": role, "content": parts})

    def _part(self, part: Any, kind: str) -> list[dict[str, Any]]:
        if isinstance(part, str):
            return [{"type": kind, "text": part}]
        data = part.model_dump()
        if data.get("scaffold"):
            self.report.drop(f"scaffolding part ({data['scaffold']}) of another agent")
            return []
        if part.type == "text":
            return [{"type": kind, "text": data["text"]}]
        url = (data.get("image_url") or {}).get("url") if isinstance(data.get("image_url"), dict) else None
        if part.type == "image_url" and url and kind == "input_text":
            return [{"type": "input_image", "image_url": url}]
        self.report.drop(f"content part {part.type}")
        return []


def codex_time(value: datetime) -> str:
    """Codex stamps lines with millisecond UTC times: 2026-11-30T00:34:18.328Z."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def rollout_name(start: datetime, thread_id: str) -> Path:
    """`YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<uuid>.jsonl`, local time as Codex does."""
    local = start.astimezone()
    return Path(
        f"{local:%Y}", f"{local:%m}", f"{local:%d}", f"rollout-{local:%Y-%m-%dT%H-%M-%S}-{thread_id}.jsonl"
    )


def dump_lines(lines: list[Any]) -> str:
    return "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines)
