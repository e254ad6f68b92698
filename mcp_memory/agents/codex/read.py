"""Codex CLI rollout lines → neutral messages (parsing half of the Codex adapter).

Format facts: README.md in this package, §Records (codex-rs `protocol/src/models.rs`,
`rollout/recorder.rs`) and tests/fixtures/real/codex (rollouts written by Codex CLI 0.169.0). A rollout line is
`{"timestamp", "type", "payload"}` (0.169 adds `ordinal` and a line-level `metadata`); the transcript is
built from `response_item` lines only. Every other line (`session_meta`, `event_msg`, `turn_context`,
`world_state`, `token_usage_record`, `compacted`, …) is kept verbatim under the next message's
`metadata["native_before"]`, so that writing the session back into Codex reproduces the file line for
line. The legacy 2025 format (a bare meta object first, then bare ResponseItems and
`{"record_type": "state"}` lines) is read too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...schema import MessageIn
from ..base import MappingReport, parse_time, stable_id
from . import NAME
from .scaffold import mark, part_kinds

AGENT = NAME
TOOL_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")


@dataclass
class RolloutState:
    """What a pass over one rollout has gathered so far."""

    report: MappingReport
    session_id: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    legacy: bool = False
    header_line: dict[str, Any] | None = None  # the first line (session_meta, or the legacy bare meta)
    model: str | None = None
    cwd: str | None = None
    last_time: datetime | None = None
    pending: list[Any] = field(default_factory=list)  # non-transcript lines waiting for the next message
    pending_from: int = 0  # line number of the first pending line
    messages: list[MessageIn] = field(default_factory=list)
    seen_keys: dict[str, int] = field(default_factory=dict)


def parse_rollout(
    lines: list[Any], report: MappingReport, fallback_id: str, *, state: RolloutState | None = None,
    start: int = 0,
) -> RolloutState:
    """Decoded lines of one rollout, in order → the state holding messages and session facts. An
    incremental read passes the state kept from the lines before and the number of those lines."""
    state = state or RolloutState(report=report, session_id=fallback_id)
    for index, line in enumerate(lines, start):
        if not isinstance(line, dict):
            report.drop("line that is not a JSON object")
            continue
        if index == 0 and _is_legacy_meta(line):
            state.legacy = True
            _take_meta(state, line, legacy=True)
            state.header_line = line
            continue
        _take_line(state, line, index)
    return state


def _is_legacy_meta(line: dict[str, Any]) -> bool:
    return "type" not in line and "record_type" not in line and isinstance(line.get("id"), str)


def _take_line(state: RolloutState, line: dict[str, Any], index: int) -> None:
    kind, payload, when = _envelope(state, line)
    if when is not None:
        state.last_time = when
    if kind == "response_item" and isinstance(payload, dict):
        message = _response_item(state, payload, line, index)
        if message is not None:
            state.messages.append(message)
            return
    elif kind == "session_meta" and isinstance(payload, dict) and not state.meta:
        _take_meta(state, payload, legacy=False)
        if index == 0:
            state.header_line = line
            return
    elif kind == "turn_context" and isinstance(payload, dict):
        state.model = payload.get("model") or state.model
        state.cwd = payload.get("cwd") or state.cwd
    if not state.pending:
        state.pending_from = index
    _keep_context(state, line, kind, payload)


def _envelope(state: RolloutState, line: dict[str, Any]) -> tuple[str, Any, datetime | None]:
    """(line type, payload, timestamp) for both the current and the legacy format."""
    if state.legacy and "payload" not in line:
        if "record_type" in line:
            return f"record_type:{line['record_type']}", line, None
        return "response_item", line, None
    return str(line.get("type") or "untyped"), line.get("payload"), parse_time(line.get("timestamp"))


def _take_meta(state: RolloutState, payload: dict[str, Any], *, legacy: bool) -> None:
    state.meta = payload
    state.session_id = str(payload.get("id") or payload.get("session_id") or state.session_id)
    state.cwd = payload.get("cwd") or state.cwd
    when = parse_time(payload.get("timestamp"))
    if when is not None and state.last_time is None:
        state.last_time = when
    if legacy:
        state.report.transform("legacy rollout meta line (2025 format) → session meta")


def _keep_context(state: RolloutState, line: dict[str, Any], kind: str, payload: Any) -> None:
    sub = (
        payload.get("type") if isinstance(payload, dict) and kind in ("event_msg", "response_item") else None
    )
    label = f"{kind}/{sub}" if sub else kind
    state.report.transform(f"line type {label} → kept verbatim in metadata.native_before (not transcript)")
    state.pending.append(line)


def _response_item(
    state: RolloutState, item: dict[str, Any], line: dict[str, Any], index: int
) -> MessageIn | None:
    builder = ITEM_BUILDERS.get(str(item.get("type")))
    if builder is None:
        return None
    fields = builder(state, item)
    if fields is None:
        return None
    metadata: dict[str, Any] = {"agent_source": AGENT, "native": line}
    if item.get("type") == "message":
        mark(fields, part_kinds(item, str(fields.get("role"))), metadata)
    if state.model:
        metadata["model"] = state.model
    if state.pending:
        metadata["native_before"] = state.pending
        state.pending = []
    return MessageIn(
        append_id=_append_id(state, item, index),
        created_at=state.last_time,
        metadata=metadata,
        **fields,
    )


def _append_id(state: RolloutState, item: dict[str, Any], index: int) -> str:
    """From the item's own id (or call id) when it has one, else from its line number."""
    native = item.get("id")
    if not isinstance(native, str) or not native:
        call_id = item.get("call_id")
        native = f"{item.get('type')}:{call_id}" if call_id else f"line:{index}"
    count = state.seen_keys.get(native, 0)
    state.seen_keys[native] = count + 1
    return stable_id(AGENT, state.session_id, native, count, prefix="codex-")


def _message(state: RolloutState, item: dict[str, Any]) -> dict[str, Any] | None:
    role = item.get("role")
    if role == "developer":
        state.report.transform("message role developer → system")
        role = "system"
    if role not in ("user", "assistant", "system"):
        return None  # kept verbatim with the context lines
    return {"role": role, "content": _content(state, item.get("content"))}


def _content(state: RolloutState, parts: Any) -> Any:
    """Codex content items → a string (text only) or OpenAI-style parts."""
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return None
    converted = [_part(state, part) for part in parts if isinstance(part, dict)]
    if not converted:
        return ""
    if len(converted) == 1 and converted[0]["type"] == "text":
        return converted[0]["text"]
    return converted


def _part(state: RolloutState, part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image":
        state.report.transform("content input_image → image_url part")
        return {"type": "image_url", "image_url": {"url": part.get("image_url", "")}}
    state.report.transform(f"content part {kind} → kept as an extra part")
    return {**part, "type": str(kind or "unknown")}


def _reasoning(state: RolloutState, item: dict[str, Any]) -> dict[str, Any]:
    """Summary text is the readable thinking; encrypted_content alone becomes encrypted thinking."""
    summary = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
    raw = [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
    text = "\n\n".join(t for t in summary + raw if t)
    encrypted = item.get("encrypted_content")
    if text:
        if encrypted:
            state.report.transform(
                "reasoning encrypted_content → kept in metadata.native (summary is the thinking)"
            )
        return {"role": "assistant", "thinking": {"content": text}}
    if encrypted:
        return {"role": "assistant", "thinking": {"content": encrypted, "encrypted": True}}
    return {"role": "assistant", "thinking": {"content": ""}}


def _function_call(state: RolloutState, item: dict[str, Any]) -> dict[str, Any]:
    """An MCP tool is offered to the model inside a namespace (`mcp__<server>`, the server's `-`
    turned into `_`); the call names the namespace and the tool apart. The neutral name joins them
    the way the model sees them: `mcp__mcp_memory__recall`."""
    name = str(item.get("name") or "function")
    namespace = item.get("namespace")
    if isinstance(namespace, str) and namespace:
        state.report.transform("function_call namespace + name → one name <namespace>__<name>")
        name = f"{namespace}__{name}"
    return _call(state, item, name, item.get("arguments"))


def _custom_call(state: RolloutState, item: dict[str, Any]) -> dict[str, Any]:
    state.report.transform('custom_tool_call input → arguments {"input": …}')
    return _call(
        state, item, str(item.get("name") or "custom_tool"), json.dumps({"input": item.get("input")})
    )


def _local_shell_call(state: RolloutState, item: dict[str, Any]) -> dict[str, Any]:
    state.report.transform("local_shell_call action → tool call local_shell")
    return _call(state, item, "local_shell", json.dumps(item.get("action") or {}))


def _call(state: RolloutState, item: dict[str, Any], name: str, arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {})
    try:
        json.loads(arguments)
    except ValueError:
        state.report.transform('tool call arguments that are not JSON → {"raw": …}')
        arguments = json.dumps({"raw": arguments})
    call_id = item.get("call_id") or item.get("id") or stable_id(AGENT, state.session_id, name, arguments)
    tool_call = {"id": str(call_id), "type": "function", "function": {"name": name, "arguments": arguments}}
    return {"role": "assistant", "tool_calls": [tool_call]}


def _call_output(state: RolloutState, item: dict[str, Any]) -> dict[str, Any]:
    output = item.get("output")
    if isinstance(output, dict):  # older builds: {"content": …, "success": …}
        output = output.get("content", json.dumps(output))
    content = _content(state, output) if isinstance(output, list) else output
    if content is not None and not isinstance(content, (str, list)):
        content = json.dumps(content)
    return {"role": "tool", "tool_call_id": str(item.get("call_id") or "unknown"), "content": content}


ITEM_BUILDERS = {
    "message": _message,
    "reasoning": _reasoning,
    "function_call": _function_call,
    "custom_tool_call": _custom_call,
    "local_shell_call": _local_shell_call,
    "function_call_output": _call_output,
    "custom_tool_call_output": _call_output,
}
