"""Rendering of hostile message content (no database): Markdown with raw HTML off, the nh3
allow-list, redaction markers, search snippets, tool calls and thinking."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from mcp_memory.schema import Message
from mcp_memory.ui import render


class Tags(HTMLParser):
    """Every element of an HTML fragment, with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


@pytest.mark.parametrize("text", [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[a](javascript:alert(1))",
    "[a](JAVASCRIPT:alert(1))",
    "[a](  javascript:alert(1))",
    "[a](vbscript:msgbox(1))",
    "[a](data:text/html;base64,PHNjcmlwdD4=)",
    "<javascript:alert(1)>",
    "![x](javascript:alert(1))",
    "[a](java\tscript:alert(1))",
    "<a href='javascript:alert(1)'>x</a>",
    '<svg onload="alert(1)">',
    "[a][r]\n\n[r]: javascript:alert(1)",
])
def test_markdown_never_yields_markup_that_runs(text: str) -> None:
    tags = Tags()
    tags.feed(str(render.markdown(text)))
    assert {name for name, _ in tags.found} <= {"p", "a", "code", "mark"}, tags.found
    for _, attrs in tags.found:
        assert not [k for k, _ in attrs if k.startswith("on") or k in ("src", "style")], attrs
        href = dict(attrs).get("href")
        assert href is None or href.lower().startswith(("http:", "https:", "mailto:")), href


def test_markdown_keeps_safe_markup_and_links() -> None:
    html = str(render.markdown("**bold** `code` [docs](https://example.org/a?b=1&c=2)\n\n- one\n- two"))
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html and "<li>one</li>" in html
    assert 'href="https://example.org/a?b=1&amp;c=2"' in html and 'rel="noopener noreferrer nofollow"' in html


def test_redaction_markers_are_marked_and_other_brackets_escaped() -> None:
    html = str(render.markdown("key [REDACTED:aws_access_key] and [REDACTED:<b>x</b>]"))
    assert '<mark class="redacted">[REDACTED:aws_access_key]</mark>' in html
    assert "<b>" not in html
    assert str(render.plain("<i>[REDACTED:jwt]</i>")) == '&lt;i&gt;<mark class="redacted">[REDACTED:jwt]</mark>&lt;/i&gt;'


def test_snippet_highlights_only_the_search_marks() -> None:
    assert str(render.snippet("a **<b>hit</b>** b")) == "a <mark>&lt;b&gt;hit&lt;/b&gt;</mark> b"


def _message(**fields) -> Message:
    return Message.model_validate({"session_id": "ses_x", "seq": 3, "append_id": "a", "created_at": "2026-01-01T00:00:00Z",
                                   **fields})


def test_tool_calls_results_and_thinking_are_escaped_text() -> None:
    view = render.message_view(_message(role="assistant", content=None, thinking={"content": "<b>plan</b>"},
                                        tool_calls=[{"id": "c1", "type": "function", "function": {
                                            "name": "bash", "arguments": '{"command": "echo <script>"}'}}]))
    assert str(view.thinking) == "&lt;b&gt;plan&lt;/b&gt;"
    assert str(view.tool_calls[0].arguments) == '{\n  &#34;command&#34;: &#34;echo &lt;script&gt;&#34;\n}'
    tool = render.message_view(_message(role="tool", tool_call_id="c1", content="**not markdown** <x>"))
    assert tool.parts[0].kind == "text" and str(tool.parts[0].html) == "**not markdown** &lt;x&gt;"
    hidden = render.message_view(_message(role="assistant", content="ok", thinking={"content": "c2lnbmVk", "encrypted": True}))
    assert hidden.thinking is None and hidden.thinking_encrypted


def test_content_parts_show_images_as_labels() -> None:
    view = render.message_view(_message(role="user", content=[
        {"type": "text", "text": "look <img src=x onerror=alert(1)>"},
        {"type": "image_url", "image_url": {"url": "javascript:alert(1)"}}]))
    assert [p.kind for p in view.parts] == ["markdown", "image"]
    assert "javascript" not in str(view.parts[1].html) and "<img" not in str(view.parts[0].html)
