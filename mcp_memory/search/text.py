"""The searchable text of a stored message: what a person would read in it.

Agent scaffolding (scaffolding.py) is not part of it: a scaffolding message has no searchable
text, and scaffolding parts of a message are left out. Calls of mcp-memory's own tools are left
out of an assistant turn's text unless `echoes` is set (the index keeps a turn that only calls
them, marked as an echo, with them).
"""

from __future__ import annotations

from typing import Any

from .. import scaffolding

MAX_INDEXED_CHARS = 32_000  # a 1 MB tool output is indexed by its beginning, not tokenized whole


def payload_text(payload: dict[str, Any], *, limit: int = MAX_INDEXED_CHARS, echoes: bool = True) -> str:
    """Content text, tool-call names and arguments, and readable thinking, in that order."""
    if scaffolding.message_kind(payload) is not None:
        return ""
    pieces: list[str] = []
    content = scaffolding.conversation_content(payload.get("content"))
    if isinstance(content, str):
        pieces.append(content)
    elif isinstance(content, list):
        pieces.extend(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    for call in payload.get("tool_calls") or []:
        function = call.get("function") or {} if isinstance(call, dict) else {}
        if not echoes and scaffolding.memory_tool(function.get("name")) is not None:
            continue
        pieces.append(f"{function.get('name', '')} {function.get('arguments', '')}".strip())
    thinking = payload.get("thinking")
    if isinstance(thinking, dict) and not thinking.get("encrypted") and isinstance(thinking.get("content"), str):
        pieces.append(thinking["content"])
    return "\n".join(p for p in pieces if p)[:limit]
