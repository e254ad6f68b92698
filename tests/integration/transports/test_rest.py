"""REST (README, REST) on a real uvicorn server on loopback: tokens (none, invalid, revoked, wrong
scope, read-only), the error table, 413, 429 + Retry-After, /openapi.json, MCP at /mcp, bind rules."""

from __future__ import annotations

import pytest
from rest_support import Reply, Server  # noqa: F401  (Reply: the client's answers)

from mcp_memory.config import Settings
from mcp_memory.errors import Invalid
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.http.ratelimit import RateLimiter
from mcp_memory.http.server import is_loopback, prepare
from mcp_memory.security import tokens
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

MSG = {"role": "user", "content": "hello"}

pytest_plugins = ["security_support", "rest_support"]  # fixtures: make_token …, rest


@pytest.fixture
def projects(service) -> dict[str, str]:
    return {p: service.create_session(p, {"title": p}).session_id for p in ("A", "B")}


def test_no_invalid_and_revoked_tokens_get_401_forbidden(rest: Server, make_token, owner_db: Database) -> None:
    assert rest.call("GET", "/healthz").status == 200
    for token in (None, "nonsense", "mmt.nobody." + "x" * 43):
        reply = rest.call("GET", "/v1/sessions", token=token)
        assert reply.status == 401 and reply.body["error"]["code"] == "forbidden", token
    created = make_token("rest", ["A"])
    forged = created.token[:-4] + ("AAAA" if not created.token.endswith("AAAA") else "BBBB")
    assert rest.call("GET", "/v1/sessions", token=forged).status == 401
    assert rest.call("GET", "/v1/sessions", token=created.token).status == 200
    tokens.revoke(owner_db, created.role)
    reply = rest.call("GET", "/v1/sessions", token=created.token)
    assert reply.status == 401 and "www-authenticate" in reply.headers
    assert reply.body["error"]["code"] == "forbidden" and "revoked" in reply.body["error"]["message"]


def test_scope_and_error_table(rest: Server, make_token, projects: dict[str, str]) -> None:
    token = make_token("rw", ["A"]).token
    listed = rest.call("GET", "/v1/sessions", token=token)
    assert [s["project_id"] for s in listed.body["sessions"]] == ["A"]
    created = rest.call("POST", "/v1/sessions", token=token, body={"project_id": "A", "meta": {"title": "t"}})
    assert created.status == 201
    sid = created.body["session_id"]
    appended = rest.call("POST", f"/v1/sessions/{sid}/messages", token=token, body={**MSG, "append_id": "x1"})
    assert appended.status == 201 and appended.body["seq"] == 1
    conflict = rest.call("POST", f"/v1/sessions/{sid}/messages", token=token,
                         body={"role": "user", "content": "other", "append_id": "x1"})
    assert conflict.status == 409 and conflict.body["error"]["code"] == "conflict"
    page = rest.call("GET", f"/v1/sessions/{sid}?after_seq=0&limit=10", token=token)
    assert page.body["messages"][0]["content"] == "hello"
    assert rest.call("PATCH", f"/v1/sessions/{sid}", token=token, body={"meta": {"k": 1}}).status == 200
    snap = rest.call("POST", "/v1/snapshots", token=token, body={"session_id": sid, "commit_msg": "c"})
    assert snap.status == 201
    assert rest.call("GET", f"/v1/sessions/{sid}/snapshots", token=token).body["snapshots"]
    for method in ("POST", "GET"):
        fork = rest.call(method, f"/v1/snapshots/{snap.body['snapshot_id']}/fork", token=token)
        assert fork.status == 201 and fork.body["session_id"] != sid
    # wrong scope: project B is invisible (404) and cannot be written (403)
    assert rest.call("GET", f"/v1/sessions/{projects['B']}", token=token).status == 404
    assert rest.call("POST", f"/v1/sessions/{projects['B']}/messages", token=token, body=MSG).status == 404
    forbidden = rest.call("POST", "/v1/sessions", token=token, body={"project_id": "B"})
    assert forbidden.status == 403 and forbidden.body["error"]["code"] == "forbidden"
    # invalid input names the field
    bad = rest.call("GET", f"/v1/sessions/{sid}?after_seq=x", token=token)
    assert bad.status == 400 and "after_seq" in bad.body["error"]["message"]
    bad = rest.call("POST", "/v1/sessions", token=token, body={"meta": {}})
    assert bad.status == 400 and "project_id" in bad.body["error"]["message"]
    bad = rest.call("POST", f"/v1/sessions/{sid}/messages", token=token, raw=b"{not json")
    assert bad.status == 400 and bad.body["error"]["code"] == "invalid"
    missing = rest.call("GET", "/v1/nowhere", token=token)
    assert missing.status == 404 and missing.body["error"]["code"] == "not_found"


def test_read_only_token_cannot_write(rest: Server, make_token, projects: dict[str, str]) -> None:
    token = make_token("ro", ["A"], read_only=True).token
    assert rest.call("GET", f"/v1/sessions/{projects['A']}", token=token).status == 200
    reply = rest.call("POST", f"/v1/sessions/{projects['A']}/messages", token=token, body=MSG)
    assert reply.status == 403 and reply.body["error"]["code"] == "forbidden"


def test_body_limit_413(rest: Server, make_token, projects: dict[str, str]) -> None:
    token = make_token("big", ["A"]).token
    reply = rest.call("POST", f"/v1/sessions/{projects['A']}/messages", token=token,
                      body={"role": "user", "content": "x" * 100_000})
    assert reply.status == 413 and reply.body["error"]["code"] == "too_large"


def test_rate_limit_429_with_retry_after(settings: Settings, owner_db: Database, make_token) -> None:
    registry = TokenRegistry(settings, owner_db.dsn(), build, recheck_seconds=60)
    with Server(create_app(registry, HttpOptions(rate_limit=0.5, burst=2))) as server:
        token = make_token("rl", ["A"]).token
        statuses = [server.call("GET", "/v1/sessions", token=token) for _ in range(3)]
    assert [r.status for r in statuses] == [200, 200, 429]
    assert int(statuses[2].headers["retry-after"]) >= 1 and statuses[2].body["error"]["code"] == "rate_limited"


def test_rate_limiter_refills() -> None:
    now = [0.0]
    limiter = RateLimiter(2, 1, clock=lambda: now[0])
    assert limiter.take("a") == 0 and limiter.take("a") == 1 and limiter.take("b") == 0
    now[0] += 0.5
    assert limiter.take("a") == 0


def test_openapi_document(rest: Server) -> None:
    doc = rest.call("GET", "/openapi.json").body
    assert doc["openapi"].startswith("3.1")
    for path in ("/v1/sessions", "/v1/sessions/{session_id}/messages", "/v1/snapshots/{snapshot_id}/fork",
                 "/v1/search", "/v1/decisions", "/v1/decisions/{decision_id}"):
        assert path in doc["paths"], path
    assert set(doc["paths"]["/v1/snapshots/{snapshot_id}/fork"]) == {"get", "post"}


def test_mcp_over_http_uses_the_token_scope(rest: Server, make_token, projects: dict[str, str]) -> None:
    token = make_token("mcp", ["A"]).token
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    assert rest.call("POST", "/mcp", body=init, headers=headers).status == 401
    assert rest.call("POST", "/mcp", token=token, body=init, headers=headers).status == 200

    def tool(name: str, arguments: dict) -> dict:
        reply = rest.call("POST", "/mcp", token=token, headers={**headers, "Mcp-Protocol-Version": "2025-06-18"},
                          body={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                "params": {"name": name, "arguments": arguments}})
        assert reply.status == 200, reply.body
        return reply.body["result"]

    listed = tool("list_sessions", {})
    assert [s["project_id"] for s in listed["structuredContent"]["sessions"]] == ["A"]
    hidden = tool("read_session", {"session_id": projects["B"]})
    assert hidden["isError"] and "[not_found]" in hidden["content"][0]["text"]


def test_bind_rules(settings: Settings, owner_db: Database, make_token) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    with pytest.raises(Invalid, match="without tokens"):
        prepare(settings, "0.0.0.0")
    make_token("bind", ["A"])
    _, registry = prepare(settings, "0.0.0.0")
    registry.close()


def test_every_tool_has_its_rest_operation(rest: Server, make_token) -> None:
    """set_context, get_context and recall have routes; decisions take every field of the tools."""
    token = make_token("ops", ["A"]).token
    sid = rest.call("POST", "/v1/sessions", token=token, body={"project_id": "A"}).body["session_id"]
    one = rest.call("POST", f"/v1/sessions/{sid}/message", token=token,
                    body={"message": {**MSG, "append_id": "o1", "metadata": {"native": {"k": 1}}}})
    assert one.status == 201 and one.body["seq"] == 1
    page = rest.call("GET", f"/v1/sessions/{sid}?include_native=false&view=full", token=token).body
    assert "native" not in page["messages"][0]["metadata"]
    page = rest.call("GET", f"/v1/sessions/{sid}?include_native=true&view=full", token=token).body
    assert page["messages"][0]["metadata"]["native"] == {"k": 1}
    waited = rest.call("GET", f"/v1/sessions/{sid}?after_seq=1&wait_seconds=0.2", token=token)
    assert waited.status == 200 and waited.body["messages"] == []
    bad = rest.call("GET", f"/v1/sessions/{sid}?wait_seconds=61", token=token)
    assert bad.status == 400 and "wait_seconds" in bad.body["error"]["message"]

    assert rest.call("POST", f"/v1/sessions/{sid}/context", token=token,
                     body={"key": "stack", "value": ["pg", "mcp"]}).body == {"ok": True, "revision": 1}
    assert rest.call("GET", f"/v1/sessions/{sid}/context?key=stack", token=token).body["context"] == {
        "stack": ["pg", "mcp"]}

    first = rest.call("POST", "/v1/decisions", token=token, body={
        "session_id": sid, "decision_type": "architecture", "summary": "orders use a queue", "status": "proposed",
        "alternatives": [{"option": "cron", "why_not": "too slow"}]})
    assert first.status == 201
    second = rest.call("POST", "/v1/decisions", token=token, body={
        "session_id": sid, "decision_type": "architecture", "summary": "orders use no queue yet",
        "supersedes": first.body["decision_id"]})
    assert second.status == 201
    patched = rest.call("PATCH", f"/v1/decisions/{second.body['decision_id']}", token=token, body={
        "expected_version": 1, "alternatives": [{"option": "kafka"}], "metadata": {"ticket": "T-1"}})
    assert patched.status == 200 and patched.body == {"version": 2}
    found = rest.call("GET", "/v1/decisions?q=queue", token=token).body["decisions"]
    by_id = {d["decision_id"]: d for d in found}
    assert by_id[first.body["decision_id"]]["status"] == "superseded"
    assert by_id[second.body["decision_id"]]["alternatives"] == [{"option": "kafka", "why_not": None}]
    assert by_id[second.body["decision_id"]]["metadata"] == {"ticket": "T-1"}
    recalled = rest.call("GET", "/v1/recall?q=queue&limit=3", token=token)
    assert recalled.status == 200 and "orders use no queue yet" in recalled.body["text"]
    bad = rest.call("POST", "/v1/decisions", token=token, body={
        "session_id": sid, "decision_type": "x", "summary": "y", "status": "maybe"})
    assert bad.status == 400 and "status" in bad.body["error"]["message"]
    empty_q = rest.call("GET", "/v1/recall?q=%20", token=token)
    assert empty_q.status == 400 and empty_q.body["error"]["message"].startswith("query parameter q")


def test_openapi_bodies_come_from_the_input_models(rest: Server) -> None:
    doc = rest.call("GET", "/openapi.json").body
    append = doc["paths"]["/v1/sessions/{session_id}/messages"]["post"]["requestBody"]["content"]
    forms = append["application/json"]["schema"]["anyOf"]
    assert forms[0]["properties"]["messages"]["items"] == {"$ref": "#/components/schemas/MessageIn"}
    assert forms[1] == {"$ref": "#/components/schemas/MessageIn"}
    record = doc["paths"]["/v1/decisions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"alternatives", "supersedes", "visibility"} <= set(record["properties"])
    status = record["properties"]["status"]
    assert sorted(status["enum"]) == ["accepted", "proposed", "rejected", "superseded"]
    ids = {op["operationId"] for path in doc["paths"].values() for op in path.values()}
    assert {"set_context", "get_context", "recall", "append_message", "append_messages"} <= ids


def test_an_unexpected_database_error_is_internal_with_an_incident_id(rest: Server, make_token, owner_db: Database,
                                                                      caplog) -> None:
    token = make_token("rw", ["A"]).token
    with owner_db.transaction() as conn:  # a write function renamed behind the server's back: nobody maps that
        conn.execute("DO $$ DECLARE f regprocedure; BEGIN "
                     "FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname = 'mm_create_session' LOOP "
                     "EXECUTE format('ALTER FUNCTION %s RENAME TO mm_create_session_gone', f); END LOOP; END $$")
    reply = rest.call("POST", "/v1/sessions", token=token, body={"project_id": "A"})
    assert reply.status == 500 and reply.body["error"]["code"] == "internal"
    message = reply.body["error"]["message"]
    assert message.startswith("unexpected database error 42883 (UndefinedFunction) (incident ")
    incident = message.split("incident ")[1][:8]
    assert any(incident in r.getMessage() and r.exc_info for r in caplog.records if r.levelname == "ERROR")


def test_search_matches_are_labelled_and_hits_only_is_a_query_parameter(rest: Server, make_token, service) -> None:
    s = service.create_session("A", {"title": "t"})
    service.append_messages(s.session_id, [{"role": "user", "content": c} for c in
                                           ("first turn", "we add sandboxing now", "third turn")])
    token = make_token("rw", ["A"]).token
    every = rest.call("GET", "/v1/search?q=sandboxing", token=token).body["matches"]
    assert [(m["seq"], m["why"], m["context_of"]) for m in sorted(every, key=lambda m: m["seq"])] == \
        [(1, "context", 2), (2, "terms", None), (3, "context", 2)]
    only = rest.call("GET", "/v1/search?q=sandboxing&hits_only=true", token=token).body["matches"]
    assert [m["seq"] for m in only] == [2]
