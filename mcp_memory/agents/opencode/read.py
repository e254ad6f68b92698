"""OpenCode 1.x messages (export shape: info + parts) → neutral messages.

Format facts: README.md in this package, §Records (Part union, tool states, `toModelMessages`),
checked against sessions written by OpenCode 1.18.33 (`tests/fixtures/real/opencode/`).

One OpenCode user message → one neutral user message. One OpenCode assistant message (one model
step) → one neutral assistant message (text, reasoning as `thinking`, tool parts as `tool_calls`)
followed by one `tool` message per tool part. Each message depends only on its own native record,
so an incremental read yields exactly what a full read yields. The native record is kept under
`metadata["native"]`: the assistant message keeps its info and parts with each tool part replaced
by a `{"id", "type": "tool", "callID"}` reference; the full tool part sits on its tool message.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ...schema import ContentPart, FunctionCall, MessageIn, Thinking, ToolCall
from ..base import MappingReport
from . import NAME

AGENT = NAME
INTERRUPTED = "[Tool execution was interrupted]"
COMPACTION_PROMPT = "What did we do so far?"  # what OpenCode sends the model for a compaction part
METADATA_ONLY_PARTS = ("step-start", "snapshot", "patch", "agent", "retry")


def obj(value: Any) -> dict[str, Any]:
    """A native field that should be an object: itself, or {} when it is anything else (crafted or
    from another version), so that lookups in it need no further checks."""
    return value if isinstance(value, dict) else {}


def ms_to_datetime(value: Any) -> datetime | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        return None
    return datetime.fromtimestamp(value / 1000, tz=UTC)


def convert_message(native: dict[str, Any], report: MappingReport) -> list[MessageIn]:
    info = obj(native.get("info"))
    parts = [p for p in native.get("parts") or [] if isinstance(p, dict)]
    role = info.get("role")
    if role == "user":
        return [_user_message(info, parts, report)]
    if role == "assistant":
        return _assistant_messages(info, parts, report)
    report.drop(f"message role: {role}")
    return []


def _base_metadata(info: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"agent_source": AGENT}
    model = info.get("modelID") or (info.get("model") or {}).get("modelID")
    if model:
        metadata["model"] = model
    provider = info.get("providerID") or (info.get("model") or {}).get("providerID")
    if provider:
        metadata["provider"] = provider
    if info.get("agent"):
        metadata["opencode_agent"] = info["agent"]
    return metadata


# --- user ------------------------------------------------------------------------------------------


def _user_message(info: dict[str, Any], parts: list[dict[str, Any]], report: MappingReport) -> MessageIn:
    content: list[dict[str, Any]] = []
    for part in parts:
        content.extend(_user_part(part, report))
    metadata = _base_metadata(info)
    metadata["native"] = {"info": info, "parts": parts}
    if content and all(part.get("scaffold") for part in content):
        metadata["scaffold"] = content[0]["scaffold"]
    return MessageIn(
        append_id=info.get("id"),
        role="user",
        content=_compact_content(content),
        created_at=ms_to_datetime((info.get("time") or {}).get("created")),
        metadata=metadata,
    )


def _user_part(part: dict[str, Any], report: MappingReport) -> list[dict[str, Any]]:
    kind = part.get("type")
    if kind == "text":
        return _text_part(part, report)
    if kind == "file":
        return _file_part(part, report)
    if kind == "compaction":
        report.transform("part type: compaction → user text 'What did we do so far?'")
        return [{"type": "text", "text": COMPACTION_PROMPT}]
    if kind == "subtask":
        report.transform("part type: subtask → user text (its prompt)")
        return [{"type": "text", "text": str(part.get("prompt") or part.get("description") or "")}]
    return _metadata_only(part, report)


def _text_part(part: dict[str, Any], report: MappingReport) -> list[dict[str, Any]]:
    raw = part.get("text")
    text = raw if isinstance(raw, str) else ""
    if part.get("ignored"):
        report.transform("part type: text (ignored) → metadata.native only")
        return []
    if part.get("synthetic"):
        report.transform("part type: text (synthetic context) → text part marked synthetic and scaffold")
        return [{"type": "text", "text": text, "synthetic": True, "scaffold": synthetic_kind(part, text)}]
    if text.strip().startswith("<system-reminder>") and text.strip().endswith("</system-reminder>"):
        return [{"type": "text", "text": text, "scaffold": "reminder"}]
    return [{"type": "text", "text": text}]


def synthetic_kind(part: dict[str, Any], text: str) -> str:
    """What OpenCode injected (README.md §Scaffolding): the "continue" prompt after a compaction is
    an instruction, a `<system-reminder>` (plan mode) a reminder, the rest (an attached file's read
    call and content, an MCP resource, an agent mention) is "other"."""
    metadata = part.get("metadata")
    if isinstance(metadata, dict) and metadata.get("compaction_continue"):
        return "instructions"
    if text.lstrip().startswith("<system-reminder>"):
        return "reminder"
    return "other"


def _file_part(part: dict[str, Any], report: MappingReport) -> list[dict[str, Any]]:
    url = str(part.get("url") or "")
    mime = str(part.get("mime") or "application/octet-stream")
    if url.startswith("data:") and mime.startswith("image/"):
        report.transform("part type: file (data: image) → image_url content part")
        return [{"type": "image_url", "image_url": {"url": url}}]
    file: dict[str, Any] = {"filename": part.get("filename") or url.rsplit("/", 1)[-1], "mime": mime}
    if url.startswith("data:"):
        file["file_data"] = url
        report.transform("part type: file (data: URL) → file content part")
    else:
        file["url"] = url
        report.transform("part type: file (file: URL) → file content part (reference)")
    return [{"type": "file", "file": file}]


def _metadata_only(part: dict[str, Any], report: MappingReport) -> list[dict[str, Any]]:
    kind = part.get("type")
    if kind in METADATA_ONLY_PARTS:
        report.transform(f"part type: {kind} → metadata.native only")
    else:
        report.transform(f"part type: {kind} (unknown) → metadata.native only")
    return []


def _compact_content(content: list[dict[str, Any]]) -> str | list[ContentPart] | None:
    if not content:
        return None
    if len(content) == 1 and content[0].get("type") == "text" and set(content[0]) == {"type", "text"}:
        return str(content[0]["text"])
    return [ContentPart.model_validate(part) for part in content]


# --- assistant -------------------------------------------------------------------------------------


def _assistant_messages(
    info: dict[str, Any], parts: list[dict[str, Any]], report: MappingReport
) -> list[MessageIn]:
    texts: list[dict[str, Any]] = []
    reasoning: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    metadata = _base_metadata(info)
    for part in parts:
        kind = part.get("type")
        if kind == "tool" and isinstance(part.get("callID"), str) and part.get("callID"):
            tools.append(part)
            kept.append({"id": part.get("id"), "type": "tool", "callID": part["callID"]})
            continue
        kept.append(part)
        if kind == "text":
            texts.extend(_text_part(part, report))
        elif kind == "reasoning":
            reasoning.append(part)
        elif kind == "step-finish":
            _add_usage(metadata, part, report)
        elif kind == "file":
            texts.extend(_file_part(part, report))
        else:
            _metadata_only(part, report)
    if info.get("error"):
        metadata["error"] = info["error"]
        report.note("assistant messages with an error keep it under metadata.error")
    if info.get("summary") is True:
        metadata["compaction_summary"] = True
        report.transform("assistant summary (compaction) → metadata.compaction_summary")
    metadata["native"] = {"info": info, "parts": kept}
    assistant = MessageIn(
        append_id=info.get("id"),
        role="assistant",
        content=_compact_content(texts),
        tool_calls=[_tool_call(part, report) for part in tools] or None,
        thinking=_thinking(reasoning, report),
        created_at=ms_to_datetime((info.get("time") or {}).get("created")),
        metadata=metadata,
    )
    fallback = (info.get("time") or {}).get("completed") or (info.get("time") or {}).get("created")
    return [assistant, *(_tool_result(part, fallback, report) for part in tools)]


def _add_usage(metadata: dict[str, Any], part: dict[str, Any], report: MappingReport) -> None:
    usage = metadata.setdefault("usage", [])
    usage.append({k: part[k] for k in ("reason", "cost", "tokens") if k in part})
    report.transform("part type: step-finish → metadata.usage")


def _thinking(parts: list[dict[str, Any]], report: MappingReport) -> Thinking | None:
    if not parts:
        return None
    report.transform("part type: reasoning → thinking", len(parts))
    text = "\n\n".join(str(p.get("text") or "") for p in parts)
    signature = None
    encrypted = None
    for part in parts:
        provider = obj(part.get("metadata"))
        anthropic = obj(provider.get("anthropic"))
        openai = obj(provider.get("openai"))
        signature = signature or anthropic.get("signature")
        encrypted = encrypted or openai.get("reasoningEncryptedContent")
    if not text.strip() and encrypted:
        return Thinking(content=encrypted, encrypted=True, signature=None)
    return Thinking(content=text, encrypted=False, signature=signature)


def _tool_call(part: dict[str, Any], report: MappingReport) -> ToolCall:
    state = obj(part.get("state"))
    arguments = state.get("input", {})
    if not isinstance(arguments, dict):
        report.transform("tool input that is not an object → arguments as given")
    report.transform("part type: tool → tool_call + tool message")
    name = str(part.get("tool") or "unknown")
    return ToolCall(id=part["callID"], function=FunctionCall(name=name, arguments=json.dumps(arguments)))


def _tool_result(part: dict[str, Any], fallback_ms: Any, report: MappingReport) -> MessageIn:
    state = obj(part.get("state"))
    status = state.get("status")
    metadata: dict[str, Any] = {"agent_source": AGENT, "tool_status": status, "native": {"part": part}}
    if status == "completed":
        content = state.get("output")
        content = content if isinstance(content, str) else json.dumps(content)
        if isinstance(state.get("time"), dict) and state["time"].get("compacted"):
            metadata["compacted"] = True
            report.note("tool outputs cleared by compaction are marked metadata.compacted")
    elif status == "error":
        content = str(state.get("error") or "")
        metadata["is_error"] = True
    else:
        content = INTERRUPTED
        report.synthesize(f"tool result for a {status} tool call: '{INTERRUPTED}'")
    time = obj(state.get("time"))
    return MessageIn(
        append_id=str(part.get("id") or part["callID"]),
        role="tool",
        tool_call_id=part["callID"],
        name=str(part.get("tool") or "unknown"),
        content=content,
        created_at=ms_to_datetime(time.get("end") or time.get("start") or fallback_ms),
        metadata=metadata,
    )


def is_settled(native: dict[str, Any]) -> bool:
    """True when a message will not change any more (safe to capture)."""
    info = native.get("info") or {}
    if info.get("role") == "user":
        return bool(native.get("parts"))
    time = obj(info.get("time"))
    return bool(time.get("completed") or info.get("error"))
