"""MCP transport: SDK client in memory (legacy + auto), a real stdio subprocess, raw JSON-RPC."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from mcp import Client, StdioServerParameters

from mcp_memory.mcp.server import build_server

CONTRACT_TOOLS = {"create_session", "append_message", "append_messages", "read_session", "create_snapshot",
                  "list_snapshots", "load_snapshot", "list_sessions", "update_session_meta"}
pytestmark = pytest.mark.anyio


@pytest.fixture(params=["legacy", "auto"])
async def client(service, request):
    async with Client(build_server(lambda: service), mode=request.param) as c:
        yield c


def _text(result) -> str:
    return result.content[0].text


async def test_tools_are_listed_with_annotations(client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert CONTRACT_TOOLS <= set(tools)
    assert tools["read_session"].annotations.read_only_hint is True
    assert tools["append_message"].annotations.idempotent_hint is True
    assert tools["append_message"].input_schema["properties"]["message"]
    assert all(t.description for t in tools.values())


async def test_session_lifecycle_over_mcp(client) -> None:
    created = await client.call_tool("create_session", {"project_id": "p", "meta": {"agent_source": "claude-code"}})
    sid = created.structured_content["session_id"]
    message = {"append_id": "m1", "role": "assistant", "content": "calling",
               "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
               "thinking": {"content": "hmm", "encrypted": False}}
    first = await client.call_tool("append_message", {"session_id": sid, "message": message})
    assert first.structured_content == {"seq": 1, "duplicate": False, "append_id": "m1", "redacted": 0}
    again = await client.call_tool("append_message", {"session_id": sid, "message": message})
    assert again.structured_content["duplicate"] is True and again.structured_content["seq"] == 1
    batch = await client.call_tool("append_messages", {"session_id": sid, "messages": [
        {"append_id": "m2", "role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"append_id": "m3", "role": "assistant", "content": "done"}]})
    assert batch.structured_content["seqs"] == [2, 3]
    page = (await client.call_tool("read_session", {"session_id": sid, "after_seq": 1, "limit": 1})).structured_content
    assert [m["seq"] for m in page["messages"]] == [2] and page["has_more"] and page["next_after_seq"] == 2
    snap = (await client.call_tool("create_snapshot", {"session_id": sid, "commit_msg": "c"})).structured_content
    assert snap["up_to_seq"] == 3
    listed = (await client.call_tool("list_snapshots", {"session_id": sid})).structured_content
    assert listed["snapshots"][0]["snapshot_id"] == snap["snapshot_id"]
    fork = (await client.call_tool("load_snapshot", {"snapshot_id": snap["snapshot_id"],
                                                     "meta": {"agent_source": "opencode"}})).structured_content
    assert fork["session_id"] != sid
    history = (await client.call_tool("read_session", {"session_id": fork["session_id"]})).structured_content
    assert [m["content"] for m in history["messages"]][-1] == "done"
    assert history["messages"][0]["thinking"]["content"] == "hmm"
    sessions = (await client.call_tool("list_sessions", {"project_id": "p"})).structured_content["sessions"]
    assert {s["session_id"] for s in sessions} == {sid, fork["session_id"]}
    meta = (await client.call_tool("update_session_meta", {"session_id": sid, "meta": {"title": "x"}}))
    assert meta.structured_content["session"]["title"] == "x"


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("append_message", {"session_id": "ses_x", "message": {"role": "robot"}}, "[invalid] message.role must be one of"),
        ("append_message", {"session_id": "ses_x", "message": {"role": "tool", "content": "x"}},
         "[invalid] message.tool_call_id is required"),
        ("read_session", {"session_id": "ses_x", "limit": 5000}, "[invalid] limit"),
        ("read_session", {"session_id": "ses_00000000-0000-0000-0000-000000000000"}, "[not_found] session"),
        ("load_snapshot", {"snapshot_id": 424242}, "[not_found] snapshot 424242"),
        ("create_session", {"project_id": ""}, "[invalid] project_id"),
        ("create_session", {}, "[invalid] project_id"),
        ("list_sessions", {"cursor": "%%%"}, "[invalid] cursor"),
    ],
)
async def test_errors_carry_codes(client, tool, args, expected) -> None:
    result = await client.call_tool(tool, args)
    assert result.is_error
    assert _text(result).startswith(expected), _text(result)


async def test_conflict_code(client) -> None:
    sid = (await client.call_tool("create_session", {"project_id": "p"})).structured_content["session_id"]
    await client.call_tool("append_message", {"session_id": sid, "message": {"append_id": "k", "role": "user", "content": "a"}})
    result = await client.call_tool("append_message", {"session_id": sid, "message": {"append_id": "k", "role": "user", "content": "b"}})
    assert result.is_error and _text(result).startswith("[conflict] append_id k")


def _server_env(settings, profile) -> dict[str, str]:
    return {**profile, "MCP_MEMORY_DSN": settings.dsn}


async def test_stdio_subprocess_with_sdk_client(settings, profile) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_memory", "serve"],
                                   env=_server_env(settings, profile))
    async with Client(params, mode="legacy", read_timeout_seconds=30) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert CONTRACT_TOOLS <= names
        sid = (await c.call_tool("create_session", {"project_id": "stdio"})).structured_content["session_id"]
        result = await c.call_tool("append_message", {"session_id": sid, "message": {"role": "user", "content": "你好"}})
        assert result.structured_content["seq"] == 1
        page = await c.call_tool("read_session", {"session_id": sid})
        assert page.structured_content["messages"][0]["content"] == "你好"


def test_raw_stdout_carries_only_json_rpc(settings, profile) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "mcp_memory", "serve"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_server_env(settings, profile), text=True)
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "create_session",
                                                                        "arguments": {"project_id": "raw"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "append_message", "arguments": {
            "session_id": "ses_00000000-0000-0000-0000-000000000000", "message": {"role": "user", "content": "x"}}}},
    ]
    replies = {}
    try:
        for request in requests:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            if "id" in request:
                line = proc.stdout.readline()
                reply = json.loads(line)  # every stdout line must be JSON-RPC
                assert reply["jsonrpc"] == "2.0"
                replies[reply["id"]] = reply
        proc.stdin.close()
        assert proc.wait(timeout=15) == 0
        assert proc.stdout.read() == ""  # nothing else was written
    finally:
        if proc.poll() is None:
            proc.kill()
    assert replies[1]["result"]["protocolVersion"] == "2025-06-18"
    assert CONTRACT_TOOLS <= {t["name"] for t in replies[2]["result"]["tools"]}
    assert replies[3]["result"]["structuredContent"]["session_id"].startswith("ses_")
    assert replies[4]["result"]["isError"] is True
    assert replies[4]["result"]["content"][0]["text"].startswith("[not_found]")


def test_initialize_is_fast_even_when_database_is_down(profile) -> None:
    env = {**profile, "MCP_MEMORY_DSN": "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"}
    proc = subprocess.Popen([sys.executable, "-m", "mcp_memory", "serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        started = time.monotonic()
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        assert time.monotonic() - started < 10
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "create_session", "arguments": {"project_id": "p"}}}) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        assert reply["result"]["isError"] and reply["result"]["content"][0]["text"].startswith("[unavailable]")
        assert "nobody" not in reply["result"]["content"][0]["text"] or "***" not in reply["result"]["content"][0]["text"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=15)
