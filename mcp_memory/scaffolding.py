"""What an agent injects into its own sessions, and what mcp-memory's own tools put there.

Agents write more than the conversation into their session files: Codex its base instructions,
permission texts and `<environment_context>` turns, Claude Code `<system-reminder>` blocks and
command caveats, Gemini CLI its session-context setup. Each adapter marks such material, and keeps
it, so that a round trip into the same agent stays lossless:

- a whole message: `metadata["scaffold"] = kind` (a short word: "instructions", "environment",
  "permissions", "skills", "reminder", "caveat", "command", "other");
- a part of a message's content: the content part carries `"scaffold": kind`.

Scaffolding is not conversation: it is left out of the search index, the embeddings and recall, the
conversation view of read_session and sessions written into another agent (a relay); the full view
and a round trip into the same agent keep it.

Echoes are the agent's calls of mcp-memory's own tools and their results: an earlier search,
recall or read_session copied into the session. They stay in the session as they were, and are
kept apart in the index (`message_search.echo`), so that search and recall leave them out unless
asked (`include_echoes`). A call is ours when its function name carries the server name the
installers register (`mcp-memory`) the way agents prefix MCP tools: Claude Code
`mcp__mcp-memory__search`, Codex 0.169 `mcp__mcp_memory__search`, Gemini CLI 0.61
`mcp_mcp-memory_search`, OpenCode `mcp-memory_search`, others `mcp-memory__search` or
`mcp-memory.search`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from .schema import MessageIn

KEY = "scaffold"
KINDS = frozenset({"instructions", "environment", "permissions", "skills", "reminder", "caveat", "command",
                   "other"})

_MEMORY_TOOL = re.compile(r"(?:mcp__?)?mcp[-_]memory(?:__|[._/:-])(?P<tool>[A-Za-z][A-Za-z0-9_]{0,63})")


def message_kind(payload: Mapping[str, Any]) -> str | None:
    """The scaffold kind of a whole stored message (its payload), or None for conversation."""
    metadata = payload.get("metadata")
    if isinstance(metadata, Mapping):
        kind = metadata.get(KEY)
        if isinstance(kind, str) and kind:
            return kind
    return None


def is_scaffold_part(part: Any) -> bool:
    """Whether one content part (a stored dict or a ContentPart) is marked as scaffolding."""
    value = part.get(KEY) if isinstance(part, Mapping) else getattr(part, KEY, None)
    return isinstance(value, str) and bool(value)


def conversation_content(content: Any) -> Any:
    """Content without its scaffolding parts (a string is returned as it is)."""
    if isinstance(content, list) and any(is_scaffold_part(p) for p in content):
        return [p for p in content if not is_scaffold_part(p)]
    return content


def without_scaffolding(messages: list[MessageIn]) -> tuple[list[MessageIn], int]:
    """The messages as another agent should receive them: scaffolding messages left out, scaffolding
    parts taken out of the others (a message left with nothing to say goes too); and how many
    messages went."""
    kept: list[MessageIn] = []
    for message in messages:
        if isinstance(message.metadata.get(KEY), str) and message.metadata[KEY]:
            continue
        content = message.content
        if isinstance(content, list) and any(is_scaffold_part(p) for p in content):
            rest = [p for p in content if not is_scaffold_part(p)]
            if not rest and not message.tool_calls and message.thinking is None and message.role != "tool":
                continue
            message = message.model_copy(update={"content": rest})
        kept.append(message)
    return kept, len(messages) - len(kept)


def is_marked(message: MessageIn) -> bool:
    """Whether the message or one of its content parts is marked as scaffolding."""
    if KEY in message.metadata:
        return True
    return isinstance(message.content, list) and any(is_scaffold_part(p) for p in message.content)


def unmarked(message: MessageIn) -> MessageIn:
    """The message without its scaffolding marks (as versions before them stored it)."""
    content = message.content
    if isinstance(content, list):
        content = [_without_key(p) if is_scaffold_part(p) else p for p in content]
    return message.model_copy(update={"metadata": {k: v for k, v in message.metadata.items() if k != KEY},
                                      "content": content})


def _without_key(part: Any) -> Any:
    data = part.model_dump(exclude={KEY})
    return type(part).model_validate(data)


def memory_tool(name: Any) -> str | None:
    """The mcp-memory tool a function name calls (`mcp__mcp-memory__search` → "search"), or None."""
    if not isinstance(name, str):
        return None
    match = _MEMORY_TOOL.fullmatch(name)
    return match.group("tool") if match and match.group("tool") in _tools() else None


@cache
def _tools() -> frozenset[str]:
    from .operations import OPERATIONS  # the MCP tools; imported late: operations imports the agents

    return frozenset(op.name for op in OPERATIONS)


def memory_calls(payloads: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """call id → tool, for the calls of mcp-memory's tools among these payloads."""
    calls: dict[str, str] = {}
    for payload in payloads:
        for call in payload.get("tool_calls") or []:
            if not isinstance(call, Mapping):
                continue
            function = call.get("function")
            tool = memory_tool(function.get("name") if isinstance(function, Mapping) else None)
            if tool is not None and isinstance(call.get("id"), str):
                calls[call["id"]] = tool
    return calls


def echo_tool(payload: Mapping[str, Any], calls: Mapping[str, str]) -> str | None:
    """The mcp-memory tool a message echoes, or None: a tool result of one of its calls (`calls`:
    call id → tool, see memory_calls), or an assistant turn that only calls its tools."""
    if payload.get("role") == "tool":
        call_id = payload.get("tool_call_id")
        return (calls.get(call_id) if isinstance(call_id, str) else None) or memory_tool(payload.get("name"))
    tool_calls = payload.get("tool_calls") or []
    if payload.get("role") != "assistant" or not tool_calls or _has_text(payload.get("content")):
        return None
    tools = [memory_tool(((c.get("function") or {}) if isinstance(c, Mapping) else {}).get("name"))
             for c in tool_calls]
    return tools[0] if all(tools) else None


def unanswered(payloads: Iterable[Mapping[str, Any]], calls: Mapping[str, str]) -> list[str]:
    """Tool-call ids that tool results among `payloads` answer but `calls` does not know (their call
    came earlier than these payloads)."""
    known = set(calls)
    return sorted({p["tool_call_id"] for p in payloads
                   if p.get("role") == "tool" and isinstance(p.get("tool_call_id"), str)
                   and p["tool_call_id"] not in known})


def _has_text(content: Any) -> bool:
    content = conversation_content(content)
    if isinstance(content, str):
        return bool(content.strip())
    if isinstance(content, list):
        return any(isinstance(p, Mapping) and isinstance(p.get("text"), str) and p["text"].strip() for p in content)
    return False
