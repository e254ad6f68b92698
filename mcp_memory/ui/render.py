"""Message content → safe HTML. Content is attacker-controlled: Markdown is parsed with raw HTML
off (markdown-it-py), the result goes through nh3's allow-list (only http, https and mailto links),
and every other text is escaped. `[REDACTED:…]` markers are marked up so they stay visible."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from ..schema import Message

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
_TAGS = {"p", "br", "hr", "em", "strong", "del", "code", "pre", "blockquote", "ul", "ol", "li", "a",
         "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td"}
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
_SCHEMES = {"http", "https", "mailto"}
_REDACTED = re.compile(r"\[REDACTED:([A-Za-z0-9_.\-]{1,40})\]")
_HIGHLIGHT = re.compile(r"\*\*(.+?)\*\*")


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


@dataclass
class Part:
    kind: str  # markdown | text | image | other
    html: Markup


@dataclass
class ToolCallView:
    call_id: str
    name: str
    arguments: Markup


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


def _part(part: Any, as_markdown: bool) -> Part:
    if hasattr(part, "model_dump"):  # a ContentPart of the neutral schema
        part = part.model_dump(exclude_none=True)
    if not isinstance(part, dict):
        return Part("text", plain(str(part)))
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return Part("markdown", markdown(part["text"])) if as_markdown else Part("text", plain(part["text"]))
    if kind in ("image_url", "image", "input_image"):
        return Part("image", plain(f"[{kind}]"))
    return Part("other", plain(json.dumps(part, ensure_ascii=False)[:4000]))


def message_view(message: Message) -> MessageView:
    as_markdown = message.role in ("user", "assistant", "system")
    view = MessageView(seq=message.seq, role=message.role, created_at=message.created_at,
                       inherited_from=message.inherited_from, tool_call_id=message.tool_call_id,
                       model=message.metadata.get("model") if isinstance(message.metadata.get("model"), str) else None)
    content = message.content
    if isinstance(content, str) and content:
        view.parts.append(Part("markdown", markdown(content)) if as_markdown else Part("text", plain(content)))
    elif isinstance(content, list):
        view.parts.extend(_part(p, as_markdown) for p in content)
    for call in message.tool_calls or []:
        view.tool_calls.append(ToolCallView(call_id=call.id, name=call.function.name,
                                            arguments=plain(pretty_json(call.function.arguments))))
    if message.thinking is not None:
        view.thinking_encrypted = bool(message.thinking.encrypted)
        if message.thinking.content and not view.thinking_encrypted:
            view.thinking = plain(message.thinking.content)
    return view
