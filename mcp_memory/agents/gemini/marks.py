"""What Gemini CLI 0.61 itself puts into a chat, told apart from what the user and the model said.

Scaffolding (README.md, §Scaffolding): the `<session_context>` setup turn and the `<hook_context>`
blocks that hooks add before (SessionStart, headless) or after (BeforeAgent) a prompt. Also the
function names of MCP calls, which must say server and tool.
"""

from __future__ import annotations

import re
from typing import Any

CONTEXT_PREFIX = "<session_context>"  # Gemini's setup turn: environment, folder tree, GEMINI.md memory
HOOK_OPEN, HOOK_CLOSE = "<hook_context>", "</hook_context>"  # what hooks add to a prompt (our recall)


def is_hook_part(part: Any) -> bool:
    """A text part that is one `<hook_context>` block: what a BeforeAgent hook adds after a prompt."""
    text = part if isinstance(part, str) else part.get("text") if isinstance(part, dict) else None
    if not isinstance(text, str) or (isinstance(part, dict) and set(part) != {"text"}):
        return False
    text = text.strip()
    return text.startswith(HOOK_OPEN) and text.endswith(HOOK_CLOSE) and text.count(HOOK_CLOSE) == 1


def mark_hook_parts(parts: list[Any]) -> list[dict[str, Any]] | None:
    """Text parts, one of them a hook's `<hook_context>` block → the same parts, that one marked
    `"scaffold": "reminder"`; None when there is no such part or a part is not plain text."""
    if not any(map(is_hook_part, parts)):
        return None
    if not all(isinstance(p, str) or (isinstance(p, dict) and set(p) == {"text"}) for p in parts):
        return None
    out = []
    for part in parts:
        text = part if isinstance(part, str) else part["text"]
        out.append({"type": "text", "text": text, **({"scaffold": "reminder"} if is_hook_part(part) else {})})
    return out


def is_prompt(record: Any) -> bool:
    """A user record holding something the user typed (not the setup turn, not hook context only)."""
    if not isinstance(record, dict) or record.get("type") != "user":
        return False
    content = record.get("content")
    parts = content if isinstance(content, list) else [content]
    prose = [p for p in parts if not (isinstance(p, dict) and "functionResponse" in p)]
    text = text_of(prose)
    return bool(text.strip()) and scaffold_kind(text) is None and not all(map(is_hook_part, prose))


def scaffold_kind(content: Any) -> str | None:
    """The scaffold kind of a whole user turn that Gemini wrote itself, None for what the user said."""
    if not isinstance(content, str):
        return None
    text = content.strip()
    if text.startswith(CONTEXT_PREFIX):
        return "environment"
    if text.startswith(HOOK_OPEN) and text.endswith(HOOK_CLOSE) and text.count(HOOK_CLOSE) == 1:
        return "reminder"
    return None


def split_hook_context(content: Any) -> Any:
    """A prompt that starts with a hook's `<hook_context>` block → the block (with the blank line after
    it) as a marked part, then the prompt: the two join back into the same text. Anything else as is."""
    if not isinstance(content, str) or not content.startswith(HOOK_OPEN) or HOOK_CLOSE not in content:
        return content
    end = content.index(HOOK_CLOSE) + len(HOOK_CLOSE)
    while end < len(content) and content[end] in "\r\n":
        end += 1
    return [
        {"type": "text", "text": content[:end], "scaffold": "reminder"},
        {"type": "text", "text": content[end:]},
    ]


MCP_DISPLAY = re.compile(r"(?P<tool>.+) \((?P<server>.+) MCP Server\)")


def tool_name(call: dict[str, Any]) -> str:
    """A call's function name, saying server and tool for MCP tools. 0.61 names an MCP tool
    `mcp_<server>_<tool>` for its model (`generateValidName`) and displays `<tool> (<server> MCP Server)`;
    older files may hold a bare `<tool>` or `<server>__<tool>`, so a call whose displayName names its
    server gets the 0.61 form."""
    name = str(call.get("name") or "tool")
    display = call.get("displayName")
    shown = MCP_DISPLAY.fullmatch(display) if isinstance(display, str) and len(display) <= 300 else None
    if shown is None:
        return name
    server, tool = shown["server"], shown["tool"]
    full = re.sub(r"[^a-zA-Z0-9_\-.:]", "_", f"mcp_{server}_{tool}")
    return name if name.startswith(full[: len("mcp_") + len(server)]) else full


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content]
    texts = [p if isinstance(p, str) else p.get("text") if isinstance(p, dict) else None for p in parts]
    return "".join(t for t in texts if isinstance(t, str))
