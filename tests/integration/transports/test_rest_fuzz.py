"""Property tests: schemathesis against /openapi.json (bounded: few examples per operation, loopback
only, no shrinking database) and hypothesis on the MCP tool inputs. No 5xx, no crash, and every
rejection names the field it rejects."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from rest_support import Server

from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.http.openapi import document
from mcp_memory.mcp.server import build_server
from mcp_memory.wiring import build

BOUNDED = settings(max_examples=12, deadline=None, database=None, derandomize=True,
                   suppress_health_check=list(HealthCheck))

pytest_plugins = ["security_support"]


def _field_names(operation: dict) -> set[str]:
    names = {p["name"] for p in operation.get("parameters", [])} | {"body", "message", "messages", "meta"}
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    return names | set(body.get("properties", {}))


def test_openapi_fuzz_never_5xx(settings_, owner_db, make_token) -> None:
    schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a dev dependency")
    registry = TokenRegistry(settings_, owner_db.dsn(), build, recheck_seconds=60)
    token = make_token("fuzz", ["A", "B"]).token
    doc = document()
    with Server(create_app(registry, HttpOptions(rate_limit=0, max_body_bytes=256 * 1024))) as server:
        schema = schemathesis.openapi.from_dict(doc)
        for result in schema.get_all_operations():
            operation = result.ok()
            spec = doc["paths"][operation.path][operation.method.lower()]

            @BOUNDED
            @given(case=operation.as_strategy())
            def check(case) -> None:
                response = case.call(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
                assert response.status_code < 500, (case.method, case.path, response.text)
                if response.status_code == 400:
                    message = response.json()["error"]["message"]
                    assert any(re.search(rf"\b{re.escape(n)}\b", message) for n in _field_names(spec)), message  # noqa: B023 - run at once

            check()


@pytest.fixture
def settings_(settings):
    return settings


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=8)
_TOOLS = {
    "create_session": {"project_id": _json, "meta": _json},
    "append_message": {"session_id": _json, "message": _json},
    "append_messages": {"session_id": _json, "messages": _json},
    "read_session": {"session_id": _json, "after_seq": _json, "limit": _json},
    "create_snapshot": {"session_id": _json, "commit_msg": _json},
    "load_snapshot": {"snapshot_id": _json, "meta": _json},
    "list_sessions": {"project_id": _json, "limit": _json, "cursor": _json},
    "update_session_meta": {"session_id": _json, "meta": _json},
    "record_decision": {"session_id": _json, "decision_type": _json, "summary": _json, "status": _json,
                        "alternatives": _json, "metadata": _json},
    "update_decision": {"decision_id": _json, "expected_version": _json, "alternatives": _json, "metadata": _json},
    "search_decisions": {"query": _json, "status": _json, "limit": _json},
    "set_context": {"session_id": _json, "key": _json, "value": _json},
    "get_context": {"session_id": _json, "key": _json},
    "search_messages": {"query": _json, "role": _json, "mode": _json, "limit": _json},
    "recall": {"query": _json, "limit": _json},
}


@pytest.mark.anyio
async def test_mcp_tool_inputs_never_crash(service) -> None:
    async with Client(build_server(lambda: service)) as client:
        for name, fields in _TOOLS.items():
            samples = st.fixed_dictionaries({}, optional=fields)

            cases: list[dict] = []

            @BOUNDED
            @given(arguments=samples)
            def collect(arguments: dict) -> None:
                cases.append(arguments)  # noqa: B023 - run at once

            collect()
            for arguments in cases:
                result = await client.call_tool(name, arguments)
                if result.is_error:
                    text = result.content[0].text
                    assert re.match(r"^\[(invalid|not_found|conflict)\] ", text), (name, arguments, text)
                    if text.startswith("[invalid]"):
                        assert any(f in text for f in (*fields, "message", "messages", "arguments")), text
