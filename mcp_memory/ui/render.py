"""Message content → safe HTML. Content is attacker-controlled: Markdown is parsed with raw HTML
off (markdown-it-py), the result goes through nh3's allow-list (only http, https and mailto links),
and every other text is escaped. `[REDACTED:…]` markers are marked up so they stay visible.

Agent scaffolding (a message's `metadata.scaffold`, a content part's `scaffold` key: injected
instructions, environment blocks, reminders, …) is not a turn of the conversation: the timeline
leaves it out unless asked, and then shows it collapsed under its kind. Calls of mcp-memory's own
tools and their results ("echoes" of the memory itself) are labelled "memory tool"."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from .. import scaffolding
from ..schema import Message

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
_TAGS = {"p", "br", "hr", "em", "strong", "del", "code", "pre", "blockquote", "ul", "ol", "li", "a",
         "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td"}
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
_SCHEMES = {"http", "https", "mailto"}
_REDACTED = re.compile(r"\[REDACTED:([A-Za-z0-9_.\-]{1,40})\]")
_HIGHLIGHT = re.compile(r"\*\*(.+?)\*\*")
# a tool of this server as agents name it to their model: mcp__mcp-memory__search (Claude Code, Codex),
# mcp-memory_search (OpenCode), mcp-memory__search or mcp-memory.search (others)
SCAFFOLD_KINDS = ("instructions", "environment", "permissions", "skills", "reminder", "caveat", "command", "other")


def _mark_redactions(html: str) -> str:
    return _REDACTED.sub(r'<mark class="redacted">[REDACTED:\1]</mark>', html)


def markdown(text: str) -> Markup:
    """Sanitized HTML of Markdown text (raw HTML shown as text, script URLs dropped)."""
    html = nh3.clean(_MD.render(text), tags=_TAGS, attributes=_ATTRIBUTES, url_schemes=_SCHEMES,
                     link_rel="noopener noreferrer nofollow")
    return Markup(_mark_redactions(html))  # nh3's output, then fixed markup only


def plain(text: str) -> Markup:
    """Escaped text with redaction markers marked up (tool arguments and results)."""
    return Markup(_mark_redactions(str(escape(text))))  # escaped first


def snippet(text: str) -> Markup:
    """A search snippet: escaped, with the search's **highlights** as <mark>."""
    return Markup(_HIGHLIGHT.sub(r"<mark>\1</mark>", str(plain(text))))  # escaped first


def pretty_json(arguments: Any) -> str:
    """Tool-call arguments (a JSON string, as OpenAI holds them) indented for reading."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return json.dumps(arguments, indent=2, ensure_ascii=False)


def is_memory_tool(name: str) -> bool:
    """Whether a tool-call function name calls one of mcp-memory's own MCP tools (scaffolding.py)."""
    return scaffolding.memory_tool(name) is not None


def scaffold_kind(value: Any) -> str | None:
    """The scaffolding kind a message or part is marked with (an unknown string counts as "other")."""
    if value is None or value is False:
        return None
    return value if value in SCAFFOLD_KINDS else "other"


@dataclass
class Part:
    kind: str  # markdown | text | image | other
    html: Markup
    scaffold: str | None = None  # the scaffolding kind of this part, if it is scaffolding


@dataclass
class ToolCallView:
    call_id: str
    name: str
    arguments: Markup
    memory: bool = False  # a call of mcp-memory's own tools


@dataclass
class MessageView:
    seq: int
    role: str
    created_at: str
    inherited_from: str | None
    parts: list[Part] = field(default_factory=list)
    tool_calls: list[ToolCallView] = field(default_factory=list)
    tool_call_id: str | None = None
    thinking: Markup | None = None
    thinking_encrypted: bool = False
    model: str | None = None
    scaffold: str | None = None  # the whole message is scaffolding of this kind
    memory_result: bool = False  # the result of a call of mcp-memory's own tools

    def has_turn(self) -> bool:
        """Whether anything of it is left once scaffolding parts are hidden."""
        return bool(self.tool_calls or self.thinking or self.thinking_encrypted or self.role == "tool"
                    or not self.parts or any(p.scaffold is None for p in self.parts))

    def without_scaffolding(self) -> MessageView:
        self.parts = [p for p in self.parts if p.scaffold is None]
        return self


def _part(part: Any, as_markdown: bool) -> Part:
    if hasattr(part, "model_dump"):  # a ContentPart of the neutral schema
        part = part.model_dump(exclude_none=True)
    if not isinstance(part, dict):
        return Part("text", plain(str(part)))
    kind, scaffold = part.get("type"), scaffold_kind(part.get("scaffold"))
    if kind == "text" and isinstance(part.get("text"), str):
        if as_markdown and scaffold is None:
            return Part("markdown", markdown(part["text"]))
        return Part("text", plain(part["text"]), scaffold)
    if kind in ("image_url", "image", "input_image"):
        return Part("image", plain(f"[{kind}]"), scaffold)
    return Part("other", plain(json.dumps(part, ensure_ascii=False)[:4000]), scaffold)


def message_view(message: Message) -> MessageView:
    as_markdown = message.role in ("user", "assistant", "system")
    view = MessageView(seq=message.seq, role=message.role, created_at=message.created_at,
                       inherited_from=message.inherited_from, tool_call_id=message.tool_call_id,
                       model=message.metadata.get("model") if isinstance(message.metadata.get("model"), str) else None,
                       scaffold=scaffold_kind(message.metadata.get("scaffold")))
    if view.scaffold is not None:
        as_markdown = False  # injected text is shown as written, not formatted as a turn
    content = message.content
    if isinstance(content, str) and content:
        view.parts.append(Part("markdown", markdown(content)) if as_markdown else Part("text", plain(content)))
    elif isinstance(content, list):
        view.parts.extend(_part(p, as_markdown) for p in content)
    for call in message.tool_calls or []:
        view.tool_calls.append(ToolCallView(call_id=call.id, name=call.function.name,
                                            arguments=plain(pretty_json(call.function.arguments)),
                                            memory=is_memory_tool(call.function.name)))
    if message.thinking is not None:
        view.thinking_encrypted = bool(message.thinking.encrypted)
        if message.thinking.content and not view.thinking_encrypted:
            view.thinking = plain(message.thinking.content)
    return view


def timeline(messages: list[Message], *, show_scaffolding: bool,
             earlier_calls: set[str] | None = None) -> list[MessageView]:
    """The views of a page of messages: results of memory-tool calls (made on this page, or in
    `earlier_calls` before it) labelled, scaffolding left out unless `show_scaffolding`."""
    views = [message_view(m) for m in messages]
    calls = {c.call_id for v in views for c in v.tool_calls if c.memory} | (earlier_calls or set())
    for view in views:
        view.memory_result = view.role == "tool" and view.tool_call_id in calls
    if show_scaffolding:
        return views
    return [v.without_scaffolding() for v in views if v.scaffold is None and v.has_turn()]
