"""Neutral tool calls and results → OpenCode tool parts, content items (text, image, file) → its text
and file parts, plus model / usage fields for written messages.

Facts (README.md in this package, §Records and §Writing) — one part
per call and result, `input` a JSON object, `output` a string, failures as `status: "error"`;
OpenCode's built-in tools take camelCase arguments (`filePath`, `oldString`), as the 1.18.33
sessions in `tests/fixtures/real/opencode/` show.
"""

from __future__ import annotations

import json
from typing import Any

from ...schema import MessageIn, ToolCall
from ..base import MappingReport, epoch_ms
from .read import INTERRUPTED

TOOL_NAMES = {  # other agents' tool names → OpenCode's built-in ones
    "Bash": "bash",
    "shell": "bash",
    "run_shell_command": "bash",
    "exec_command": "bash",
    "Read": "read",
    "read_file": "read",
    "Edit": "edit",
    "MultiEdit": "edit",
    "replace": "edit",
    "Write": "write",
    "write_file": "write",
    "Glob": "glob",
    "Grep": "grep",
    "search_file_content": "grep",
    "LS": "list",
    "list_directory": "list",
    "Task": "task",
    "TodoWrite": "todowrite",
    "WebFetch": "webfetch",
    "web_fetch": "webfetch",
}
PROVIDERS = (
    ("claude", "anthropic"),
    ("gpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("codex", "openai"),
    ("gemini", "google"),
    ("deepseek", "deepseek"),
)



def tool_part(
    call: ToolCall | None,
    result: MessageIn | None,
    *,
    ids: tuple[str, str, str],
    start: int,
    report: MappingReport,
) -> dict[str, Any]:
    """One tool part from a neutral call and its result; `ids` = (part, message, session)."""
    name = call.function.name if call else (result.name if result and result.name else "unknown")
    native_name = TOOL_NAMES.get(name, name)
    if native_name != name:
        report.transform(f"tool name {name} → {native_name}")
    arguments = _tool_input(report, call.function.arguments if call else "{}")
    if native_name != name:
        arguments = _camel_keys(report, arguments)
    end = max(start, epoch_ms(result.created_at) or start) if result else start
    state: dict[str, Any] = {"input": arguments, "time": {"start": start, "end": end}}
    if result is None:
        state.update(status="error", error=INTERRUPTED)
        report.synthesize(f"error result '{INTERRUPTED}' for a tool call without result")
    elif result.metadata.get("is_error") or result.metadata.get("tool_status") == "error":
        state.update(status="error", error=_result_text(report, result))
    else:
        state.update(status="completed", output=_result_text(report, result), title=native_name, metadata={})
    part_id, message_id, session_id = ids
    return {
        "id": part_id,
        "sessionID": session_id,
        "messageID": message_id,
        "type": "tool",
        "callID": call.id if call else (result.tool_call_id if result else None),
        "tool": native_name,
        "state": state,
    }


def _tool_input(report: MappingReport, arguments: str) -> dict[str, Any]:
    value = json.loads(arguments) if arguments else {}
    if isinstance(value, dict):
        return value
    report.transform("tool arguments that are not an object → {'input': …}")
    return {"input": value}


def _camel_keys(report: MappingReport, arguments: dict[str, Any]) -> dict[str, Any]:
    """OpenCode's built-in tools take camelCase arguments (`filePath`, `oldString`)."""
    renamed = {}
    for key, value in arguments.items():
        head, *rest = key.split("_")
        camel = head + "".join(word[:1].upper() + word[1:] for word in rest)
        if camel != key:
            report.transform(f"tool argument {key} → {camel}")
        renamed[camel] = value
    return renamed


def _result_text(report: MappingReport, result: MessageIn) -> str:
    if isinstance(result.content, str):
        return result.content
    texts = []
    for part in result.content or []:
        if part.type == "text":
            texts.append(str(getattr(part, "text", "")))
        else:
            report.drop(f"tool result content part type: {part.type}")
    return "\n".join(texts)


def guess_provider(model: str) -> str:
    lowered = model.lower()
    for prefix, provider in PROVIDERS:
        if lowered.startswith(prefix):
            return provider
    return "opencode"


def tokens_from_usage(usage: Any) -> dict[str, Any]:
    usage = usage if isinstance(usage, dict) else {}
    return {
        "input": int(usage.get("input_tokens") or usage.get("prompt_tokens") or 0),
        "output": int(usage.get("output_tokens") or usage.get("completion_tokens") or 0),
        "reasoning": 0,
        "cache": {
            "read": int(usage.get("cache_read_input_tokens") or 0),
            "write": int(usage.get("cache_creation_input_tokens") or 0),
        },
    }


def content_part(data: dict[str, Any]) -> dict[str, Any] | None:
    """A neutral content item as an OpenCode part: text, or a file part for an image or file (None
    for an item with nothing to show)."""
    kind = data.get("type")
    if kind == "text":
        return {"type": "text", "text": data.get("text", "")}
    if kind == "image_url":
        url = str((data.get("image_url") or {}).get("url") or "")
        mime = url[5:].split(";", 1)[0] if url.startswith("data:") else "image/png"
        return {"type": "file", "mime": mime or "image/png", "url": url} if url else None
    if kind == "file":
        file = data.get("file") or {}
        source = file.get("file_data") or file.get("url")
        if not source:
            return None
        return {
            "type": "file",
            "mime": file.get("mime") or "application/octet-stream",
            "filename": file.get("filename") or "file",
            "url": source,
        }
    return None
