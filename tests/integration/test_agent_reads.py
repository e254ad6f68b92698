"""What an agent's model receives when it reads captured sessions over MCP (README, MCP tools): the neutral
conversation, compact, without the agents' native records unless asked for. Budget: a real captured
session's read_session text is at most 3× its own conversation text + 2 KB; list_sessions(limit=10)
stays under 15 KB."""

from __future__ import annotations

import json

import pytest
from agent_fixtures import FIXTURES, fixtures
from mcp import Client

from mcp_memory.agents import adapter_for
from mcp_memory.core.imports import store_sessions
from mcp_memory.mcp.server import build_server

pytestmark = pytest.mark.anyio


def conversation_chars(messages: list[dict]) -> int:
    """The text a person would call the conversation: contents, tool call names and arguments,
    readable thinking."""
    total = 0
    for m in messages:
        content = m.get("content")
        total += len(content) if isinstance(content, str) else len(json.dumps(content or [], ensure_ascii=False))
        for call in m.get("tool_calls") or []:
            total += len(call["function"]["name"]) + len(call["function"]["arguments"])
        if m.get("thinking") and not m["thinking"].get("encrypted"):
            total += len(m["thinking"].get("content") or "")
    return total


async def test_a_captured_session_fits_what_an_agent_shows_its_model(service) -> None:
    path = next((FIXTURES / "real" / "claude-code").rglob("7f067304-*.jsonl"))
    (stored,) = store_sessions(service, adapter_for("claude-code").read([path]), project_id="budget")
    async with Client(build_server(lambda: service), mode="legacy") as client:
        talk = await client.call_tool("read_session", {"session_id": stored.session_id})
        compact = await client.call_tool("read_session", {"session_id": stored.session_id, "view": "full"})
        full = await client.call_tool("read_session", {"session_id": stored.session_id, "include_native": True,
                                                       "view": "full"})
    text = compact.content[0].text
    messages = json.loads(text)["messages"]
    said = conversation_chars(messages)
    assert len(messages) == stored.messages >= 8
    assert all("native" not in (m.get("metadata") or {}) for m in messages)
    assert len(text) <= 3 * said + 2048, (len(text), said)
    assert "\n" not in text.strip()  # compact JSON, not pretty-printed
    native = json.loads(full.content[0].text)["messages"]
    assert any("native" in (m.get("metadata") or {}) for m in native)  # still there when asked for
    assert len(full.content[0].text) > 5 * len(text)
    # the conversation view (the default): the session's fields once, per message what was said
    conversation = talk.content[0].text
    print(f"\n{path.name}: {len(messages)} messages, conversation {said} chars; read_session text: "
          f"conversation view {len(conversation)}, full {len(text)}, full with native {len(full.content[0].text)}")
    assert len(json.loads(conversation)["messages"]) == len(messages)
    assert len(conversation) <= 1.5 * said + 120 * len(messages) + 1000, (len(conversation), said)
    assert len(conversation) < len(text)


async def test_a_session_listing_stays_small(service) -> None:
    for agent in ("claude-code", "opencode", "codex", "gemini"):
        for path in fixtures(agent):
            sessions = [s for s in adapter_for(agent).read([path]) if s.messages]
            store_sessions(service, sessions, project_id="budget")
    async with Client(build_server(lambda: service), mode="legacy") as client:
        listing = await client.call_tool("list_sessions", {"project_id": "budget", "limit": 10})
    text = listing.content[0].text
    sessions = json.loads(text)["sessions"]
    assert len(sessions) == 10
    assert len(text) < 15_000, len(text)
    assert all("native" not in (s.get("meta") or {}) for s in sessions)
