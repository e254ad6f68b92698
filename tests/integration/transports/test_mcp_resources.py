"""MCP prompts and memory:// resources, with the official MCP client over stdio against
`mcp-memory serve`: listed (templates and concrete ones), read, scoped by the caller's token (row-level
security), and coded JSON-RPC errors for unknown or forbidden ones."""

from __future__ import annotations

import json
import sys

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio
pytest_plugins = ["security_support"]
TEMPLATES = {"memory://sessions/{session_id}", "memory://sessions/{session_id}/digest",
             "memory://decisions/{decision_id}", "memory://projects/{project_id}/digest",
             "memory://projects/{project_id}/digest/{day}"}


@pytest.fixture
def stored(service):
    """Project `shop` (a day with a decision, a file, a command and a question) and project `secret`."""
    sid = service.create_session("shop", {"title": "orders", "agent_source": "claude-code"}).session_id
    service.append_messages(sid, [
        {"role": "user", "content": "Should orders use a queue?", "created_at": "2026-03-01T09:00:00Z"},
        {"role": "assistant", "content": "Not yet: QPS is low.", "created_at": "2026-03-01T09:01:00Z"},
        {"role": "assistant", "created_at": "2026-03-01T09:02:00Z", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Edit",
                                                          "arguments": json.dumps({"file_path": "src/orders.py"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok", "created_at": "2026-03-01T09:03:00Z"},
        {"role": "assistant", "content": "Add retries too?", "created_at": "2026-03-01T09:04:00Z"},
    ])
    decision = service.record_decision(sid, "architecture", "Orders do not use a queue yet", status="rejected",
                                       message_seq=2).decision_id
    hidden = service.create_session("secret", {"title": "hidden"}).session_id
    service.append_message(hidden, {"role": "user", "content": "SECRETWORD plans", "created_at": "2026-03-01T10:00:00Z"})
    return {"session": sid, "decision": decision, "hidden": hidden}


def _server(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "mcp_memory", "serve"], env=env)


async def _read(client: Client, uri: str) -> str:
    result = await client.read_resource(uri)
    return result.contents[0].text


async def test_prompt_and_resources_over_stdio(settings, profile, stored) -> None:
    env = {**profile, "MCP_MEMORY_DSN": settings.dsn}
    async with Client(_server(env), mode="legacy", read_timeout_seconds=30) as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert templates == TEMPLATES
        listed = {r.uri for r in (await client.list_resources()).resources}
        assert {f"memory://sessions/{stored['session']}", "memory://projects/shop/digest",
                f"memory://sessions/{stored['hidden']}"} <= {str(u) for u in listed}

        session = json.loads(await _read(client, f"memory://sessions/{stored['session']}"))
        assert session["session"]["title"] == "orders" and [m["seq"] for m in session["messages"]] == [1, 2, 3, 4, 5]
        decision = json.loads(await _read(client, f"memory://decisions/{stored['decision']}"))
        assert decision["status"] == "rejected" and decision["session_id"] == stored["session"]
        digest = await _read(client, "memory://projects/shop/digest")
        assert digest.startswith("Digest of project shop, 2026-03-01") and f"{stored['decision']}" in digest
        assert "`src/orders.py` [Edit]" in digest and f"{stored['session']}#5" in digest
        assert await _read(client, "memory://projects/shop/digest/2026-03-01") == digest
        assert "Orders do not use a queue" in await _read(client, f"memory://sessions/{stored['session']}/digest")
        assert (await _read(client, "memory://projects/shop/digest/2020-01-01")).startswith("Nothing stored")

        with pytest.raises(MCPError) as missing:
            await client.read_resource("memory://sessions/ses_nope")
        assert missing.value.code == -32002 and missing.value.error.message.startswith("[not_found] session ses_nope")
        assert missing.value.error.data["code"] == "not_found"
        with pytest.raises(MCPError) as bad:
            await client.read_resource("memory://projects/shop/digest/2026-02-30")
        assert bad.value.code == -32602 and bad.value.error.message.startswith("[invalid] day")

        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert {a.name: a.required for a in prompts["resume_from_history"].arguments} == {
            "project_id": True, "task": False}
        prompt = await client.get_prompt("resume_from_history", {"project_id": "shop", "task": "queue for orders"})
        text = prompt.messages[0].content.text
        assert prompt.messages[0].role == "user" and "read_session" in text
        assert "Digest of project shop, 2026-03-01" in text and "[rejected]" in text
        assert "SECRETWORD" not in text
        bare = await client.get_prompt("resume_from_history", {"project_id": "shop"})
        assert "Orders do not use a queue yet" in bare.messages[0].content.text


async def test_a_token_sees_only_its_projects_resources(settings, profile, stored, make_token) -> None:
    token = make_token("res", ["shop"], read_only=True)
    env = {**profile, "MCP_MEMORY_DSN": token.dsn, "MCP_MEMORY_PASSWORD": token.token}
    async with Client(_server(env), mode="legacy", read_timeout_seconds=30) as client:
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert f"memory://sessions/{stored['session']}" in listed
        assert not any(stored["hidden"] in uri or "secret" in uri for uri in listed)
        assert "src/orders.py" in await _read(client, "memory://projects/shop/digest")
        with pytest.raises(MCPError) as forbidden:
            await client.read_resource(f"memory://sessions/{stored['hidden']}")
        assert forbidden.value.code == -32002 and "[not_found]" in forbidden.value.error.message
        assert (await _read(client, "memory://projects/secret/digest")).startswith("Nothing stored")
        with pytest.raises(MCPError) as other:
            await client.read_resource(f"memory://sessions/{stored['hidden']}/digest")
        assert "[not_found]" in other.value.error.message
        prompt = await client.get_prompt("resume_from_history", {"project_id": "secret", "task": "plans"})
        assert "SECRETWORD" not in prompt.messages[0].content.text


async def test_hostile_uris_and_prompt_arguments_get_coded_errors(service, stored) -> None:
    from mcp_memory.mcp.server import build_server

    async with Client(build_server(lambda: service), mode="legacy") as client:
        with pytest.raises(MCPError) as long:
            await client.read_resource("memory://projects/" + "p" * 5000 + "/digest")
        assert long.value.code == -32602 and long.value.error.message.startswith("[invalid] project_id has 5000")
        with pytest.raises(MCPError) as nul:
            await client.get_prompt("resume_from_history", {"project_id": "shop", "task": "a\x00b"})
        assert "[invalid] task" in nul.value.error.message
        with pytest.raises(MCPError) as unknown:
            await client.read_resource(f"memory://decisions/dec_{'0' * 32}")
        assert unknown.value.code == -32002 and unknown.value.error.message.startswith("[not_found] decision")
        with pytest.raises(MCPError) as day:
            await client.read_resource("memory://projects/shop/digest/tomorrow")
        assert day.value.code == -32602 and "[invalid] day" in day.value.error.message
        with pytest.raises(MCPError) as other:
            await client.read_resource("memory://elsewhere/" + "x" * 5000)
        assert other.value.code == -32002 and other.value.error.message.startswith("[not_found] resource memory://")
        assert len(other.value.error.message) < 1000 and other.value.error.data["code"] == "not_found"
        assert "memory://decisions/{decision_id}" in other.value.error.message  # the forms there are
