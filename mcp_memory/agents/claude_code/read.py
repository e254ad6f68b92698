"""Claude Code transcript lines → neutral messages (the parsing half of the Claude Code adapter).

Format facts: README.md in this package, §Records (transcripts of Claude Code 2.0.46–2.1.42: one JSONL
line per content block, lines of one API message sharing `message.id`, a `parentUuid` chain that is a
DAG, compaction roots with `logicalParentUuid`, old in-file `isSidechain` lines) and the files Claude
Code 2.1.328 wrote in tests/fixtures/real/claude-code (new record types `attachment`, `atis-latch`,
`api-request*`, `tools-used`, `last-prompt`, `cost-state`, `mode`; sub-agents in `subagents/agent-*.jsonl`).

Every line is kept: lines that form a message go under that message's `metadata["native"]["lines"]`,
the other lines (attachments, progress, snapshots, bookkeeping records) under `["before"]` of the next
message, and what follows the last message under the session's `meta["native"]["tail"]`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...schema import ContentPart, FunctionCall, MessageIn, Thinking, ToolCall
from ..base import MappingReport
from . import NAME, scaffold
from .transcript import MESSAGE_TYPES, Line, chain_uuids

AGENT = NAME
KNOWN_TYPES = frozenset(
    {
        "user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation", "progress",
        "pr-link", "attachment", "ai-title", "custom-title", "last-prompt", "mode", "permission-mode",
        "agent-setting", "continued-in", "atis-latch", "api-request-shape", "api-request-blob",
        "api-request", "tools-used", "cost-state",
    }
)  # fmt: skip
COMMAND_MARKERS = ("<command-name>", "<local-command-stdout>", "<command-message>", "<bash-input>")


@dataclass
class ReadState:
    """What a later read of the same file needs to continue where this one stopped (JSON-able)."""

    anchor: str | None = None  # uuid of the last line that formed a message
    last_message_id: str | None = None  # message.id of the last assistant message
    tool_names: dict[str, str] = field(default_factory=dict)  # tool_use id → name, awaiting a result

    def to_dict(self) -> dict[str, Any]:
        return {"anchor": self.anchor, "last_message_id": self.last_message_id, "tool_names": self.tool_names}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReadState:
        return cls(data.get("anchor"), data.get("last_message_id"), dict(data.get("tool_names") or {}))


class MessageBuilder:
    """Turns the conversation lines of one file (or one sidechain) into neutral messages, in chain order."""

    def __init__(self, report: MappingReport, state: ReadState) -> None:
        self.report = report
        self.state = state
        self.messages: list[MessageIn] = []
        self.before: list[dict[str, Any]] = []
        self.group: list[dict[str, Any]] = []  # lines of the open assistant message
        self.group_gap: list[dict[str, Any]] = []  # non-message lines inside the open assistant message

    def run(self, lines: list[Line]) -> list[dict[str, Any]]:
        """Build messages from lines; returns the records after the last message (the tail)."""
        chain = chain_uuids(lines, self.report, self.state.anchor)
        for line in lines:
            on_chain = line.type in MESSAGE_TYPES and line.uuid in chain
            if on_chain and line.type == "assistant":
                self._assistant_line(line.record)
            elif on_chain:
                self._flush_group()
                self._user_line(line.record)
            else:
                self._account(line, chain)
                (self.group_gap if self.group else self.before).append(line.record)
        self._flush_group()
        tail, self.before = self.before, []
        return tail

    # -- accounting ---------------------------------------------------------------------------

    def _account(self, line: Line, chain: set[str]) -> None:
        kind = line.type
        if kind in ("system", "attachment", "progress"):
            inner = line.record.get("subtype") or (line.record.get(kind) or line.record.get("data") or {})
            sub = inner if isinstance(inner, str) else inner.get("type") if isinstance(inner, dict) else None
            kind = f"{kind}/{sub}" if sub else kind
        if line.type in MESSAGE_TYPES:
            self.report.transform(
                f"{line.type} line off the conversation chain (fork/rewind), kept as native only"
            )
        elif line.type in KNOWN_TYPES:
            self.report.transform(f"{kind} line kept as native only")
        else:
            self.report.transform(f"unknown line type {kind!r} kept as native only")

    # -- assistant -----------------------------------------------------------------------------

    def _assistant_line(self, record: dict[str, Any]) -> None:
        message_id = _message_id(record)
        if self.group and _message_id(self.group[0]) == message_id:
            self.group.extend(self.group_gap)
            self.group_gap = []
            self.group.append(record)
            return
        self._flush_group()
        if message_id == self.state.last_message_id and not self.messages:
            self.report.note(
                "an assistant message continued after the previous sync; its rest is a second message"
            )
        self.group = [record]

    def _flush_group(self) -> None:
        if not self.group:
            return
        native = {"lines": self.group, "before": self.before}
        self.messages.append(assistant_message(self.group, native, self.report, self.state))
        self.state.anchor = self.group[-1].get("uuid")
        self.state.last_message_id = _message_id(self.group[0])
        self.group, self.before, self.group_gap = [], self.group_gap, []

    # -- user ----------------------------------------------------------------------------------

    def _user_line(self, record: dict[str, Any]) -> None:
        built = user_messages(record, self.report, self.state)
        for index, message in enumerate(built):
            if index == 0:
                message.metadata["native"] = {"lines": [record], "before": self.before}
            else:
                message.metadata["native"] = {"same_line": record.get("uuid")}
            self._mark_compaction(message)
        self.messages.extend(built)
        self.before = []
        self.state.anchor = record.get("uuid")

    def _mark_compaction(self, message: MessageIn) -> None:
        for record in message.metadata["native"].get("before", []):
            if record.get("type") == "system" and record.get("subtype") == "compact_boundary":
                meta = record.get("compactMetadata") or {}
                message.metadata["compaction"] = {
                    "boundary_uuid": record.get("uuid"),
                    "trigger": meta.get("trigger"),
                    "pre_tokens": meta.get("preTokens"),
                }
                self.report.transform("system/compact_boundary → metadata.compaction of the next message")


def _message_id(record: dict[str, Any]) -> str:
    message = record.get("message") or {}
    return str(message.get("id") or record.get("requestId") or record.get("uuid"))


def _time(record: dict[str, Any]) -> datetime | None:
    value = record.get("timestamp")
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def _blocks(record: dict[str, Any]) -> list[dict[str, Any]]:
    content = (record.get("message") or {}).get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def assistant_message(
    lines: list[dict[str, Any]], native: dict[str, Any], report: MappingReport, state: ReadState
) -> MessageIn:
    """One API response, possibly spread over several lines sharing message.id."""
    message_lines = [line for line in lines if line.get("type") == "assistant"]
    blocks = [block for line in message_lines for block in _blocks(line)]
    texts, parts, calls, thoughts = [], [], [], []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
            parts.append({"type": "text", "text": block.get("text") or ""})
        elif kind == "tool_use":
            calls.append(_tool_call(block))
            state.tool_names[str(block.get("id"))] = str(block.get("name"))
        elif kind in ("thinking", "redacted_thinking"):
            thoughts.append(block)
        else:
            parts.append(dict(block))
            report.transform(f"assistant block {kind!r} → content part of the same type")
    head = (message_lines[0].get("message") or {}) if message_lines else {}
    model = head.get("model")
    metadata: dict[str, Any] = {"agent_source": AGENT, "model": model, "native": native}
    metadata.update(_assistant_extras(message_lines))
    content: Any = texts[0] if len(parts) == 1 and len(texts) == 1 else (parts or None)
    return MessageIn(
        append_id=message_lines[0].get("uuid") if message_lines else None,
        role="assistant",
        content=content,
        tool_calls=calls or None,
        thinking=_thinking(thoughts, report),
        created_at=_time(message_lines[0]) if message_lines else None,
        metadata=metadata,
    )


def _assistant_extras(lines: list[dict[str, Any]]) -> dict[str, Any]:
    extras: dict[str, Any] = {}
    last = lines[-1] if lines else {}
    message = last.get("message") or {}
    if message.get("usage"):
        extras["usage"] = message["usage"]  # repeated on every line of the message: taken once
    stop = next(
        (ln["message"].get("stop_reason") for ln in reversed(lines) if ln["message"].get("stop_reason")), None
    )
    if stop:
        extras["stop_reason"] = stop
    if message.get("model") == "<synthetic>":
        extras["kind"] = "synthetic"
    if any(line.get("isApiErrorMessage") for line in lines):
        extras["kind"] = "api_error"
    return extras


def _tool_call(block: dict[str, Any]) -> ToolCall:
    arguments = json.dumps(block.get("input") if block.get("input") is not None else {}, ensure_ascii=False)
    return ToolCall(id=str(block.get("id")), function=FunctionCall(name=str(block.get("name")), arguments=arguments))


def _thinking(blocks: list[dict[str, Any]], report: MappingReport) -> Thinking | None:
    if not blocks:
        return None
    if len(blocks) > 1:
        report.transform("several thinking blocks in one message joined into one thinking field")
    redacted = [b for b in blocks if b.get("type") == "redacted_thinking"]
    if len(redacted) == len(blocks):
        return Thinking(content="\n\n".join(str(b.get("data") or "") for b in blocks), encrypted=True)
    plain = [b for b in blocks if b.get("type") == "thinking"]
    if redacted:
        report.transform("redacted_thinking next to thinking kept as native only")
    signature = next((b.get("signature") for b in plain if b.get("signature")), None)
    return Thinking(content="\n\n".join(str(b.get("thinking") or "") for b in plain), signature=signature)


def user_messages(record: dict[str, Any], report: MappingReport, state: ReadState) -> list[MessageIn]:
    """A user line: a prompt, or tool results (each its own `tool` message), or both."""
    content = (record.get("message") or {}).get("content")
    stamp = _time(record)
    uuid = record.get("uuid")
    if isinstance(content, str) or content is None:
        return [_user_text(content or "", record, stamp)]
    messages: list[MessageIn] = []
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            if parts:
                messages.append(_user_parts(parts, record, stamp))
                parts = []
            messages.append(_tool_message(block, record, stamp, state))
        elif isinstance(block, dict):
            parts.append(content_part(block, report))
    if parts or not messages:
        messages.append(_user_parts(parts, record, stamp))
    if len(messages) > 1:
        for index, message in enumerate(messages):
            message.append_id = f"{uuid}:{index}"
    return messages


def _user_text(text: str, record: dict[str, Any], stamp: datetime | None) -> MessageIn:
    """A prompt given as one string: kept a string unless a system reminder sits in typed text."""
    metadata: dict[str, Any] = {"agent_source": AGENT, **_user_kind(record, text)}
    kind = scaffold.meta_kind(text) if record.get("isMeta") else scaffold.text_kind(text)
    content: Any = text
    if kind is not None:
        metadata["scaffold"] = kind
    elif len(pieces := scaffold.split_text(text)) > 1:
        content = pieces
    return MessageIn(append_id=record.get("uuid"), role="user", content=content, created_at=stamp,
                     metadata=metadata)


def _user_parts(parts: list[dict[str, Any]], record: dict[str, Any], stamp: datetime | None) -> MessageIn:
    text = "".join(p.get("text", "") for p in parts if p.get("type") == "text")
    metadata: dict[str, Any] = {"agent_source": AGENT, **_user_kind(record, text)}
    marked = scaffold.mark_parts(parts)
    kind = scaffold.meta_kind(text) if record.get("isMeta") else scaffold.message_kind(marked)
    if kind is not None:
        metadata["scaffold"] = kind
    return MessageIn(append_id=record.get("uuid"), role="user", content=as_parts(marked), created_at=stamp,
                     metadata=metadata)


def _user_kind(record: dict[str, Any], text: str) -> dict[str, Any]:
    if record.get("isCompactSummary"):
        return {"kind": "compact_summary"}
    if record.get("isMeta"):
        return {"kind": "meta"}
    if text.lstrip().startswith(COMMAND_MARKERS):
        return {"kind": "command"}
    if text.startswith("[Request interrupted"):
        return {"kind": "interrupt"}
    return {}


def _tool_message(
    block: dict[str, Any], record: dict[str, Any], stamp: datetime | None, state: ReadState
) -> MessageIn:
    call_id = str(block.get("tool_use_id"))
    raw = block.get("content")
    if isinstance(raw, list):
        content: Any = _reminders_apart([content_part(part, None) for part in raw if isinstance(part, dict)])
    else:
        content = "" if raw is None else str(raw)
        if len(pieces := scaffold.split_text(content)) > 1:  # a reminder appended to a tool's output
            content = pieces
    metadata: dict[str, Any] = {"agent_source": AGENT}
    if block.get("is_error"):
        metadata["is_error"] = True
    return MessageIn(
        append_id=record.get("uuid"),
        role="tool",
        tool_call_id=call_id,
        name=state.tool_names.pop(call_id, None),
        content=content,
        created_at=stamp,
        metadata=metadata,
    )


def _reminders_apart(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool output parts with each `<system-reminder>` split off into a part marked "reminder"."""
    split: list[dict[str, Any]] = []
    for part in parts:
        if part.get("type") == "text":
            split.extend({**part, **piece} for piece in scaffold.split_text(part["text"]))
        else:
            split.append(part)
    return split


def as_parts(parts: list[dict[str, Any]]) -> list[ContentPart]:
    """Content part dicts as the neutral model's parts (extra keys, like "scaffold", are kept)."""
    return [ContentPart.model_validate(part) for part in parts]


def content_part(block: dict[str, Any], report: MappingReport | None) -> dict[str, Any]:
    """An Anthropic content block → an OpenAI-style content part (images as data: URLs)."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text") or "")}
    if kind == "image":
        source = block.get("source") or {}
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type')};base64,{source.get('data')}"
        else:
            url = str(source.get("url") or "")
        return {"type": "image_url", "image_url": {"url": url}}
    if report is not None:
        report.transform(f"user block {kind!r} → content part of the same type")
    return dict(block)
