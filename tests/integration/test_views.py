"""read_session(view): the conversation view (default) against the full one, on REST and on real
captured Claude Code sessions, whose page must come close to the conversation's own size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rest_support import Server

from mcp_memory.config import Settings
from mcp_memory.errors import Invalid
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.operations import BY_NAME, call
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

pytest_plugins = ["security_support"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = [("claude-code", f) for f in sorted((FIXTURES / "claude-code").glob("*.jsonl"))] + \
       [("codex", f) for f in sorted((FIXTURES / "codex").rglob("*.jsonl")) if "SYNTHETIC" not in f.name]


def _said(service, session_id: str) -> int:
    """Bytes of what was said: texts, thinking text, tool names and arguments; not the agent's own
    scaffolding (injected instructions and environment blocks)."""
    total = 0
    for m in service.read_session(session_id, limit=1000, view="full").messages:
        if m.metadata.get("scaffold"):
            continue
        parts = m.content if isinstance(m.content, list) else [m.content]
        total += sum(len((p if isinstance(p, str) else getattr(p, "text", "") or "").encode()) for p in parts
                     if p and not getattr(p, "scaffold", None))
        if m.thinking and m.thinking.content and not m.thinking.encrypted:
            total += len(m.thinking.content.encode())
        total += sum(len(c.function.name) + len(c.function.arguments.encode()) for c in m.tool_calls or [])
    return total


def _page_bytes(service, session_id: str, view: str) -> tuple[int, int]:
    """The text a model reads from the MCP tool (compact JSON without null fields, mcp/server.py):
    the whole page, and its messages alone."""
    op = BY_NAME["read_session"]
    result = call(service, op, op.input(session_id=session_id, limit=1000, view=view))
    messages = [m.model_dump(mode="json", exclude_none=True) for m in result.messages]
    return (len(result.model_dump_json(exclude_none=True).encode()),
            len(json.dumps(messages, ensure_ascii=False, separators=(",", ":")).encode()))


@pytest.mark.parametrize(("agent", "fixture"), REAL, ids=[f"{a}-{f.stem[:30]}" for a, f in REAL])
def test_conversation_view_of_a_real_session_is_at_most_twice_what_was_said(service, agent: str,
                                                                             fixture: Path) -> None:
    imported = service.import_session(agent, content=fixture.read_text(), name=fixture.name, project_id="views")
    for stored in imported.sessions:
        said = _said(service, stored.session_id)
        full, full_messages = _page_bytes(service, stored.session_id, "full")
        talk, talk_messages = _page_bytes(service, stored.session_id, "conversation")
        print(f"\n{fixture.name} {stored.native_id[:12]}: {stored.messages} messages, said {said} B, "
              f"full {full} B ({full / max(said, 1):.2f}×), conversation {talk} B ({talk / max(said, 1):.2f}×)")
        assert talk_messages < full_messages  # the session's fields, once, cost a few hundred bytes
        assert talk <= 2 * said + 600  # 600: the session's own fields, once, on a session of a few words


def test_views_on_rest(settings: Settings, owner_db: Database, make_token, service) -> None:
    sid = service.create_session("A", {"title": "views", "cwd": "/w/shop", "agent_source": "codex"}).session_id
    service.append_messages(sid, [
        {"append_id": "u", "role": "user", "content": [{"type": "text", "text": "look"},
                                                       {"type": "image_url", "image_url": {"url": "data:,x"}}]},
        {"append_id": "a", "role": "assistant", "content": None, "thinking": {"content": "sealed", "encrypted": True},
         "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
         "metadata": {"native": {"k": 1}}},
        {"append_id": "t", "role": "tool", "tool_call_id": "c", "content": "a.txt"}])
    registry = TokenRegistry(settings, owner_db.dsn(), lambda s: build(s, application_name="mcp-memory views"),
                             recheck_seconds=0)
    token = make_token("views", ["A"]).token
    with Server(create_app(registry, HttpOptions(rate_limit=0))) as rest:
        talk = rest.call("GET", f"/v1/sessions/{sid}", token=token).body
        assert talk["session"] == {"session_id": sid, "project_id": "A", "agent_source": "codex", "title": "views",
                                   "cwd": "/w/shop", "created_at": talk["session"]["created_at"]}
        assert [{k: v for k, v in m.items() if k != "created_at"} for m in talk["messages"]] == [
            {"seq": 1, "role": "user", "content": "look\n[image_url]"},
            {"seq": 2, "role": "assistant", "tool_calls": [{"id": "c", "name": "ls", "arguments": "{}"}]},
            {"seq": 3, "role": "tool", "content": "a.txt", "tool_call_id": "c"}]
        native = rest.call("GET", f"/v1/sessions/{sid}?include_native=true", token=token).body
        assert native["messages"][1]["native"] == {"k": 1}
        full = rest.call("GET", f"/v1/sessions/{sid}?view=full", token=token).body
        assert "session" not in full or full["session"] is None
        assert full["messages"][1]["thinking"]["encrypted"] is True
        assert full["messages"][0]["append_id"] == "u"
        bad = rest.call("GET", f"/v1/sessions/{sid}?view=summary", token=token)
        assert bad.status == 400 and bad.body["error"]["message"].startswith("view must be")
    with pytest.raises(Invalid, match="view must be one of conversation, full"):
        service.read_session(sid, view="summary")
    schema = json.dumps(BY_NAME["read_session"].input.model_json_schema())
    assert '"conversation"' in schema and '"full"' in schema
