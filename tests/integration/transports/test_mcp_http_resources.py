"""memory:// resources and the prompt over MCP streamable HTTP (`/mcp` of `mcp-memory serve-http`), with
the official MCP client and a bearer token on a real uvicorn server: every listed resource reads, the
templates' other forms read, each as the token's role sees it, and unknown or hidden resources get
coded JSON-RPC errors (as over stdio, test_mcp_resources.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from rest_support import Server

pytestmark = pytest.mark.anyio
pytest_plugins = ["security_support", "rest_support"]  # fixtures: make_token …, rest
NOT_FOUND = -32002


@pytest.fixture
def stored(service) -> dict[str, str]:
    """Project `shop` (a day with a decision) and project `secret`, which the token cannot read."""
    sid = service.create_session("shop", {"title": "orders", "agent_source": "claude-code"}).session_id
    service.append_messages(sid, [
        {"role": "user", "content": "Should orders use a queue?", "created_at": "2026-03-01T09:00:00Z"},
        {"role": "assistant", "content": "Not yet: QPS is low.", "created_at": "2026-03-01T09:01:00Z"},
    ])
    decision = service.record_decision(sid, "architecture", "Orders do not use a queue yet", status="rejected",
                                       message_seq=2).decision_id
    hidden = service.create_session("secret", {"title": "hidden"}).session_id
    service.append_message(hidden, {"role": "user", "content": "SECRETWORD plans", "created_at": "2026-03-01T10:00:00Z"})
    return {"session": sid, "decision": decision, "hidden": hidden}


@asynccontextmanager
async def connected(rest: Server, token: str) -> AsyncIterator[Client]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(f"{rest.url}/mcp", http_client=http), mode="legacy",
                            read_timeout_seconds=30) as client:
        yield client


async def text_of(client: Client, uri: str) -> tuple[str, str | None]:
    result = await client.read_resource(uri)
    (content,) = result.contents
    return content.text, content.mime_type


async def test_every_listed_resource_reads_over_http(rest: Server, make_token, stored) -> None:
    token = make_token("mcpres", ["shop"]).token
    async with connected(rest, token) as client:
        listed = {str(r.uri): r.mime_type for r in (await client.list_resources()).resources}
        assert set(listed) == {f"memory://sessions/{stored['session']}", "memory://projects/shop/digest"}, listed
        for uri, mime in listed.items():
            text, got = await text_of(client, uri)
            assert text and got == mime, (uri, text)
        session, _ = await text_of(client, f"memory://sessions/{stored['session']}")
        assert json.loads(session)["session"]["title"] == "orders"
        digest, _ = await text_of(client, "memory://projects/shop/digest")
        assert digest.startswith("Digest of project shop, 2026-03-01") and stored["decision"] in digest
        # the templates' other forms
        assert (await text_of(client, "memory://projects/shop/digest/2026-03-01"))[0] == digest
        assert "Orders do not use a queue" in (await text_of(client, f"memory://sessions/{stored['session']}/digest"))[0]
        decision, _ = await text_of(client, f"memory://decisions/{stored['decision']}")
        assert json.loads(decision)["status"] == "rejected"
        prompt = await client.get_prompt("resume_from_history", {"project_id": "shop"})
        assert "Orders do not use a queue yet" in prompt.messages[0].content.text


async def test_unknown_and_hidden_resources_get_coded_errors_over_http(rest: Server, make_token, stored) -> None:
    token = make_token("mcpbad", ["shop"]).token
    async with connected(rest, token) as client:
        for uri, message in [(f"memory://sessions/{stored['hidden']}", "[not_found] session"),
                             ("memory://sessions/ses_nope", "[not_found] session ses_nope"),
                             (f"memory://decisions/dec_{'0' * 32}", "[not_found] decision"),
                             ("memory://nothing/here", "[not_found] resource memory://nothing/here"),
                             ("file:///etc/passwd", "[not_found] resource file:///etc/passwd")]:
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            assert caught.value.code == NOT_FOUND and caught.value.error.message.startswith(message), (uri, caught.value)
            assert caught.value.error.data == {"code": "not_found", "uri": uri}
        with pytest.raises(MCPError) as day:
            await client.read_resource("memory://projects/shop/digest/2026-02-30")
        assert day.value.code == -32602 and day.value.error.message.startswith("[invalid] day")
        assert (await text_of(client, "memory://projects/secret/digest"))[0].startswith("Nothing stored")
        prompt = await client.get_prompt("resume_from_history", {"project_id": "secret", "task": "plans"})
        assert "SECRETWORD" not in prompt.messages[0].content.text
