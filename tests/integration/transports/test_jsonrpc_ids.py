"""JSON-RPC messages whose id cannot be answered to (null, a fraction, true, an object, or a line that
does not parse) get an error with id null — over stdio and over /mcp — instead of being taken for a
notification and left unanswered; true notifications (a method and no id) still get nothing."""

from __future__ import annotations

import json

import pytest
from rest_support import Server
from test_hostile_input import Wire, _answered, wire  # noqa: F401  (fixture)
from test_reliability_rest import MCP_HEADERS, _app_name, _registry

from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.mcp import wire as stdio_wire

pytest_plugins = ["security_support"]

UNUSABLE = [("null", "null"), ("1.5", "float"), ("true", "bool"), ('{"a": 1}', "object"), ("[1]", "array")]


def _request(raw_id: str) -> bytes:
    return f'{{"jsonrpc": "2.0", "id": {raw_id}, "method": "tools/list"}}'.encode()


@pytest.mark.parametrize(("raw_id", "kind"), UNUSABLE)
def test_screen_answers_an_unusable_id_with_id_null(raw_id: str, kind: str) -> None:
    answer = stdio_wire.screen(_request(raw_id), oversized=False, limit=1 << 20)
    doc = json.loads(answer.model_dump_json(by_alias=True, exclude_unset=True))
    assert doc["id"] is None and doc["error"]["code"] == stdio_wire.INVALID_REQUEST
    assert doc["error"]["message"] == f"[invalid] request.id must be a string or an integer, got {kind} " \
                                      "(JSON-RPC 2.0 as MCP uses it)"


def test_screen_keeps_notifications_unanswered_and_parse_errors_answered() -> None:
    assert stdio_wire.screen(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}', oversized=False,
                             limit=1 << 20).message.method == "notifications/initialized"
    bad_notification = b'{"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": "\\ud800"}}'
    assert stdio_wire.screen(bad_notification, oversized=False, limit=1 << 20) is None
    parse_error = stdio_wire.screen(b"{not json", oversized=False, limit=1 << 20)
    assert parse_error.id is None and parse_error.error.code == stdio_wire.PARSE_ERROR
    escaped = stdio_wire.screen(b'{"jsonrpc": "2.0", "id": "a\\"b", "method": 5}', oversized=False, limit=1 << 20)
    assert escaped.id == 'a"b'  # an id the prefix scan cannot read is taken from the parsed line


def test_stdio_answers_every_unusable_id_and_goes_on(wire: Wire) -> None:  # noqa: F811
    for raw_id, kind in UNUSABLE:
        wire.send_raw(_request(raw_id))
        assert _answered(wire, None) == f"[invalid] request.id must be a string or an integer, got {kind} " \
                                        "(JSON-RPC 2.0 as MCP uses it)"
    wire.send_raw(b"[1, 2")
    assert _answered(wire, None).startswith("[invalid] request: not valid JSON")
    wire.send({"jsonrpc": "2.0", "id": 10, "method": "tools/list"})
    assert wire.reply(30)["id"] == 10


def test_mcp_over_http_answers_an_unusable_id(settings, owner_db, make_token) -> None:
    token = make_token("ids", ["A"]).token
    registry = _registry(settings, owner_db, _app_name(), recheck_seconds=60)
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    with Server(create_app(registry, HttpOptions(rate_limit=0))) as server:
        for raw_id, kind in UNUSABLE:
            reply = server.call("POST", "/mcp", raw=_request(raw_id), headers=headers)
            assert reply.status == 400 and reply.body["id"] is None, reply.body
            assert reply.body["error"]["message"].startswith(f"[invalid] request.id must be a string or an "
                                                             f"integer, got {kind}")
        parse_error = server.call("POST", "/mcp", raw=b"{not json", headers=headers)
        assert parse_error.status == 400 and parse_error.body["id"] is None
        fine = server.call("POST", "/mcp", raw=_request("7"), headers=headers)  # the body replayed to the SDK
        assert fine.status == 200 and fine.body["id"] == 7 and fine.body["result"]["tools"]
        notification = server.call("POST", "/mcp", body={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                   headers=headers)
        assert notification.status == 202
