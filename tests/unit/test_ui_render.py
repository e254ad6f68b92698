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


def test_scaffolding_is_left_out_of_the_timeline_unless_asked() -> None:
    messages = [
        _message(seq=1, role="user", content="<environment_context>cwd=/x</environment_context>",
                 metadata={"scaffold": "environment"}),
        _message(seq=2, role="user", content=[{"type": "text", "text": "Fix the payments test"},
                                              {"type": "text", "text": "<system-reminder>be brief</system-reminder>",
                                               "scaffold": "reminder"}]),
        _message(seq=3, role="user", content=[{"type": "text", "text": "only a caveat", "scaffold": "caveat"}]),
        _message(seq=4, role="assistant", content="Done."),
    ]
    shown = render.timeline(messages, show_scaffolding=False)
    assert [v.seq for v in shown] == [2, 4]
    assert [str(p.html) for p in shown[0].parts] == ["<p>Fix the payments test</p>\n"]
    everything = render.timeline(messages, show_scaffolding=True)
    assert [v.seq for v in everything] == [1, 2, 3, 4]
    assert everything[0].scaffold == "environment" and everything[0].parts[0].kind == "text"  # not Markdown
    assert [p.scaffold for p in everything[1].parts] == [None, "reminder"]
    assert "&lt;system-reminder&gt;" in str(everything[1].parts[1].html)
    odd = render.timeline([_message(seq=1, role="user", content="x", metadata={"scaffold": "<b>new</b>"})],
                          show_scaffolding=True)
    assert odd[0].scaffold == "other"  # an unknown kind is never echoed into the page


@pytest.mark.parametrize(("name", "memory"), [
    ("mcp__mcp-memory__search_messages", True), ("mcp-memory_recall", True), ("mcp-memory__read_session", True),
    ("mcp-memory.record_decision", True), ("mcp__mcp-memory__rm_rf", False), ("search_messages", False),
    ("mcp__github__search_messages", False), ("bash", False), ("mcp__mcp-memory-evil__recall", False),
])
def test_memory_tools_are_known_by_server_and_tool_name(name: str, memory: bool) -> None:
    assert render.is_memory_tool(name) is memory


def test_memory_tool_calls_and_their_results_are_labelled() -> None:
    call = {"type": "function", "function": {"name": "mcp__mcp-memory__recall", "arguments": "{\"query\": \"x\"}"}}
    views = render.timeline([
        _message(seq=1, role="assistant", content=None, tool_calls=[
            {"id": "m1", **call}, {"id": "b1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]),
        _message(seq=2, role="tool", tool_call_id="m1", content="earlier: we chose Redis"),
        _message(seq=3, role="tool", tool_call_id="b1", content="ok"),
    ], show_scaffolding=False)
    assert [c.memory for c in views[0].tool_calls] == [True, False]
    assert [v.memory_result for v in views[1:]] == [True, False]


def test_queue_advice_names_the_gone_archiver_printably() -> None:
    from datetime import UTC, datetime

    from mcp_memory.ui.advice import queue_advice

    seen = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    gone = {"worker": "box\x1b[31m:42", "role_name": "archiver", "last_seen": seen, "alive": False, "leader": True}
    assert queue_advice({"done": 3}, [], None) is None  # nothing waits
    assert queue_advice({"pending": 2}, [{**gone, "alive": True}], seen) is None  # a live leader drains it
    text = queue_advice({"pending": 2, "running": 0}, [gone], seen) or ""
    assert text.startswith("2 export jobs wait (the oldest since 2026-12-01T08:00:00Z)")
    assert "box?[31m:42" in text and "\x1b" not in text and "2026-12-01T08:00:00Z and is gone" in text
    standby = queue_advice({"pending": 1}, [{**gone, "alive": True, "leader": False}], None) or ""
    assert "none holds the lease" in standby and "mcp-memory archive status" in standby
