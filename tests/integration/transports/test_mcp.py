"""MCP transport: SDK client in memory (legacy + auto), a real stdio subprocess, raw JSON-RPC."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import psycopg
import pytest
from mcp import Client, StdioServerParameters
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from mcp_memory.mcp.server import build_server
from mcp_memory.wiring import build

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
    assert set(tools) >= CONTRACT_TOOLS
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
    assert history["messages"][0]["thinking"] == "hmm"  # the conversation view, by default
    assert history["messages"][0]["agent"] == "claude-code" and history["session"]["agent_source"] == "opencode"
    assert history["messages"][0]["tool_calls"] == [{"id": "c1", "name": "ls", "arguments": "{}"}]
    assert history["session"]["fork_seq"] == 3 and "append_id" not in history["messages"][0]
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
        assert names >= CONTRACT_TOOLS
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
        _close(proc)
    assert replies[1]["result"]["protocolVersion"] == "2025-06-18"
    assert {t["name"] for t in replies[2]["result"]["tools"]} >= CONTRACT_TOOLS
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
        _close(proc)


def _close(proc: subprocess.Popen) -> None:
    """Reap the server and close its pipes (a pipe left to the garbage collector is a ResourceWarning,
    an error in this suite)."""
    proc.wait(timeout=15)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


# the MCP tools and /openapi.json come from one table (mcp_memory/operations.py) -------------------
def _resolve(schema: dict, defs: dict) -> dict:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _shape(schema: dict, defs: dict) -> dict:
    """What must agree for one argument: its types, enums, bounds (null branches left out)."""
    schema = _resolve(schema, defs)
    branches = [_resolve(s, defs) for s in schema.get("anyOf", [schema])]
    branches = [b for b in branches if b.get("type") != "null"]
    return {
        "types": sorted(str(b.get("type", b.get("title"))) for b in branches),
        "enums": sorted(sorted(map(str, b["enum"])) for b in branches if "enum" in b),
        "bounds": sorted(str({k: b[k] for k in ("minimum", "maximum", "minLength", "maxLength") if k in b})
                         for b in branches),
    }


def _rest_arguments(operation: dict, defs: dict) -> dict[str, tuple[bool, dict]]:
    found = {}
    for p in operation["parameters"]:
        found["query" if p["name"] == "q" else p["name"]] = (p["required"], _shape(p["schema"], defs))
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body:
        body = next(b for b in body.get("anyOf", [body]) if "properties" in b)  # the object form
        for name, prop in body["properties"].items():
            found[name] = (name in body.get("required", []), _shape(prop, defs))
    return found


def _tool_arguments(tool) -> dict[str, tuple[bool, dict]]:
    schema, defs = tool.input_schema, tool.input_schema.get("$defs", {})
    return {name: (name in schema.get("required", []), _shape(prop, defs))
            for name, prop in schema["properties"].items()}


async def test_tool_list_and_openapi_agree_argument_for_argument(client) -> None:
    from mcp_memory.http.openapi import document

    doc = document()
    defs = doc["components"]["schemas"]
    by_id = {op["operationId"]: op for path in doc["paths"].values() for op in path.values()}
    tools = (await client.list_tools()).tools
    assert len(tools) == 20  # the 16 memory operations, export/import_session, get_digest, query_memory
    for tool in tools:
        assert tool.name in by_id, f"{tool.name} has no REST operation"
        rest = _rest_arguments(by_id[tool.name], defs)
        mcp = _tool_arguments(tool)
        assert rest.keys() == mcp.keys(), tool.name
        for name in mcp:
            assert rest[name][1] == mcp[name][1], (tool.name, name)
            # a path parameter is always required; otherwise required on one side = on the other
            in_path = any(p["name"] == name and p["in"] == "path" for p in by_id[tool.name]["parameters"])
            assert rest[name][0] == mcp[name][0] or in_path, (tool.name, name)
    statuses = _shape(_tool_arguments_raw(tools, "record_decision")["status"], {})
    assert statuses["enums"] == [["accepted", "proposed", "rejected", "superseded"]]
    assert {"alternatives", "metadata"} <= set(_tool_arguments_raw(tools, "update_decision"))


def _tool_arguments_raw(tools, name: str) -> dict:
    return next(t for t in tools if t.name == name).input_schema["properties"]


async def test_descriptions_are_one_paragraph_and_results_compact_json(client) -> None:
    for tool in (await client.list_tools()).tools:
        assert "\n" not in tool.description and "  " not in tool.description, tool.name
    sid = (await client.call_tool("create_session", {"project_id": "p"})).structured_content["session_id"]
    result = await client.call_tool("list_sessions", {"project_id": "p"})
    text = _text(result)
    assert json.loads(text) == _without_nulls(result.structured_content)  # the model reads no null fields
    assert "\n" not in text and ": " not in text and sid in text


def _without_nulls(value):
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def test_service_takes_the_arguments_of_each_input_model() -> None:
    import inspect

    from mcp_memory.core.service import Service
    from mcp_memory.operations import OPERATIONS

    for op in OPERATIONS:
        params = dict(inspect.signature(getattr(Service, op.name)).parameters)
        params.pop("self")
        assert not any(p.kind is p.VAR_KEYWORD for p in params.values()), op.name
        for name, info in op.input.model_fields.items():
            assert name in params, (op.name, name)
            default = inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True)
            assert params[name].default == default, (op.name, name)
        extra = set(params) - set(op.input.model_fields)
        assert all(params[n].default is not inspect.Parameter.empty for n in extra), (op.name, extra)


async def test_read_session_leaves_native_records_out_unless_asked(client) -> None:
    sid = (await client.call_tool("create_session", {"project_id": "p", "meta": {
        "native": {"tail": [{"type": "summary"}]}, "title": "t"}})).structured_content["session_id"]
    await client.call_tool("append_message", {"session_id": sid, "message": {
        "append_id": "n1", "role": "user", "content": "x", "metadata": {"model": "m", "native": {"uuid": "u1"}}}})
    neutral = (await client.call_tool("read_session", {"session_id": sid, "view": "full"})).structured_content
    assert neutral["messages"][0]["metadata"] == {"model": "m"}
    full = (await client.call_tool("read_session", {"session_id": sid, "include_native": True,
                                                    "view": "full"})).structured_content
    assert full["messages"][0]["metadata"] == {"model": "m", "native": {"uuid": "u1"}}
    talk = (await client.call_tool("read_session", {"session_id": sid})).structured_content
    assert talk["messages"] == [{"seq": 1, "role": "user", "content": "x",
                                 "created_at": talk["messages"][0]["created_at"]}]
    assert talk["session"]["title"] == "t" and "meta" not in talk["session"]
    native = (await client.call_tool("read_session", {"session_id": sid, "include_native": True})).structured_content
    assert native["messages"][0]["native"] == {"uuid": "u1"}
    listed = (await client.call_tool("list_sessions", {"project_id": "p"})).structured_content["sessions"]
    assert listed[0]["meta"] == {"title": "t"}


async def test_read_session_waits_for_an_append_from_another_process(client, service, settings) -> None:
    import threading

    from mcp_memory.wiring import build

    sid = (await client.call_tool("create_session", {"project_id": "p"})).structured_content["session_id"]
    other = build(settings)  # another Service: its own pool, as another process would have
    try:
        timer = threading.Timer(0.5, lambda: other.append_message(sid, {"role": "user", "content": "late"}))
        started = time.monotonic()
        timer.start()
        page = (await client.call_tool("read_session", {"session_id": sid, "wait_seconds": 60})).structured_content
        waited = time.monotonic() - started
        timer.join()
    finally:
        other.db.close()
    assert [m["content"] for m in page["messages"]] == ["late"]
    assert waited < 30  # woken by the append, long before the timeout
    empty = (await client.call_tool("read_session", {"session_id": sid, "after_seq": 1,
                                                     "wait_seconds": 0.3})).structured_content
    assert (empty["messages"], empty["next_after_seq"], empty["has_more"]) == ([], 1, False)
    bad = await client.call_tool("read_session", {"session_id": sid, "wait_seconds": 61})
    assert bad.is_error and _text(bad).startswith("[invalid] wait_seconds")


def _as_owner(admin_dsn: str, dsn: str, statement: str) -> None:
    """Run one statement in the test database `dsn` with the admin role (it owns the schema)."""
    with psycopg.connect(make_conninfo(admin_dsn, dbname=conninfo_to_dict(dsn)["dbname"]), autocommit=True) as conn:
        conn.execute(statement)


async def test_a_read_only_database_says_read_only_standby(settings, admin_dsn) -> None:
    """What a DSN pointing at a hot standby gets: PostgreSQL refuses every write with
    ReadOnlySqlTransaction, here made real with default_transaction_read_only on the database."""
    name = conninfo_to_dict(settings.dsn)["dbname"]
    _as_owner(admin_dsn, settings.dsn, f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    svc = build(settings)
    try:
        async with Client(build_server(lambda: svc)) as client:
            result = await client.call_tool("create_session", {"project_id": "p"})
            listed = await client.call_tool("list_sessions", {})
    finally:
        svc.db.close()
    assert result.is_error
    assert _text(result).startswith("[unavailable] the database is read-only/standby")
    assert "Error executing tool" not in _text(result)
    assert not listed.is_error  # reads still work


async def test_an_unexpected_error_is_internal_with_an_incident_id_the_log_carries(settings, admin_dsn,
                                                                                   caplog) -> None:
    """A fault nobody mapped (here: a write function renamed behind the server's back) reaches the
    client as [internal] with a short reason and an id, and the log line carries the same id."""
    _as_owner(admin_dsn, settings.dsn, "DO $$ DECLARE f regprocedure; BEGIN "
              "FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname = 'mm_create_session' LOOP "
              "EXECUTE format('ALTER FUNCTION %s RENAME TO mm_create_session_gone', f); END LOOP; END $$")
    svc = build(settings)
    try:
        async with Client(build_server(lambda: svc)) as client:
            result = await client.call_tool("create_session", {"project_id": "p"})
    finally:
        svc.db.close()
    text = _text(result)
    assert result.is_error and text.startswith("[internal] unexpected database error 42883 (UndefinedFunction)")
    assert "Error executing tool" not in text
    incident = re.search(r"incident ([0-9a-f]{8})", text)[1]
    logged = [r for r in caplog.records if r.levelname == "ERROR" and incident in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback is in the log, under the same id
