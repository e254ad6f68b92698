"""Smaller REST holes, each reproduced on a real uvicorn server: a 503 body never says where the
database lives, a NUL in append_id is refused naming the field, a GET never forks, and a request
with an ambiguous body length (Content-Length with Transfer-Encoding) is refused."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import psycopg
import pytest
from test_rest import Server, projects  # noqa: F401  (the fixture projects)

from mcp_memory.core.messages import parse_message
from mcp_memory.errors import Invalid
from mcp_memory.http.app import HttpOptions, StrictFraming, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.store.db import without_location
from mcp_memory.wiring import build

pytest_plugins = ["security_support", "rest_support"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def unreachable(settings) -> Iterator[dict[str, str]]:
    """Three databases that cannot be reached: a closed TCP port, a missing socket folder, a host name
    that does not resolve; each with the location that must not leak."""
    port = _closed_port()
    yield {f"postgresql://mm@127.0.0.1:{port}/mm?connect_timeout=2": f"{port}",
           "postgresql://mm@/mm?host=/nonexistent-mm-socket-dir&port=5999": "nonexistent-mm-socket-dir",
           "postgresql://mm@db-h26b.invalid:5433/mm?connect_timeout=2": "db-h26b.invalid"}


def test_503_bodies_do_not_show_where_the_database_is(settings, unreachable: dict[str, str]) -> None:
    for dsn, location in unreachable.items():
        registry = TokenRegistry(settings, dsn, lambda s: build(s, application_name="mcp-memory h26b-503"))
        with Server(create_app(registry, HttpOptions(rate_limit=0))) as server:
            reply = server.call("GET", "/v1/sessions", token="mmt.someone." + "x" * 43)
        assert reply.status == 503 and reply.body["error"]["code"] == "unavailable", reply.body
        message = reply.body["error"]["message"]
        assert message.startswith("database unreachable, retry later (")
        for leak in (location, "127.0.0.1", "port ", "socket \"", "host"):
            assert leak not in message.replace("host name", ""), (leak, message)


def test_the_driver_reason_keeps_what_went_wrong_without_the_location(unreachable: dict[str, str]) -> None:
    for dsn, location in unreachable.items():
        with pytest.raises(psycopg.OperationalError) as raised:
            psycopg.connect(dsn, connect_timeout=2)
        reason = str(raised.value).splitlines()[0]
        assert location in reason  # the driver names it …
        cleaned = without_location(reason)
        assert location not in cleaned and cleaned  # … the error a client sees does not
    assert without_location('connection to server at "10.1.2.3", port 6432 failed: Connection refused') == \
        "connection to the database server failed: Connection refused"


def test_a_nul_in_append_id_names_the_field_and_the_rule(rest: Server, make_token, projects) -> None:  # noqa: F811
    token = make_token("nul", ["A"]).token
    path = f"/v1/sessions/{projects['A']}/messages"
    single = rest.call("POST", path, token=token, body={"role": "user", "content": "x", "append_id": "a\u0000b"})
    assert single.status == 400
    assert single.body["error"]["message"] == "message.append_id must not contain U+0000 (PostgreSQL text cannot hold it)"
    batch = rest.call("POST", path, token=token, body={"messages": [
        {"role": "user", "content": "fine", "append_id": "ok-1"}, {"role": "user", "content": "x", "append_id": "\u0000"}]})
    assert batch.status == 400 and batch.body["error"]["message"].startswith("messages.1.append_id must not contain U+0000")
    assert rest.call("GET", f"/v1/sessions/{projects['A']}", token=token).body["messages"] == []  # nothing stored
    with pytest.raises(Invalid, match=r"^message\.append_id must not contain U\+0000"):
        parse_message({"role": "user", "content": "x", "append_id": "a\x00"}, field="message", max_bytes=None)


def test_a_fork_by_get_needs_the_bearer_header(rest: Server, make_token, projects, settings) -> None:  # noqa: F811
    """GET on the fork path is accepted (CONTRACT §4), and only with the Authorization header: the
    /v1 routes read no cookie, so a link, a prefetcher or another site's page creates nothing."""
    token = make_token("fork", ["A"]).token
    snap = rest.call("POST", "/v1/snapshots", token=token, body={"session_id": projects["A"], "commit_msg": "c"})
    path = f"/v1/snapshots/{snap.body['snapshot_id']}/fork"
    before = _sessions(settings.dsn)
    for headers in ({}, {"Cookie": f"mm_ui_token={token}"}):
        assert rest.call("GET", path, headers=headers).status == 401
    assert _sessions(settings.dsn) == before
    assert rest.call("GET", path, token=token).status == 201 and _sessions(settings.dsn) == before + 1


def _sessions(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM sessions").fetchone()[0]


def _raw(server: Server, request: bytes) -> tuple[bytes, bytes]:
    """Send bytes as they are; (status line and headers, body) of the answer, read until the server closes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


@pytest.mark.parametrize("framing", [
    b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n",
])
def test_an_ambiguous_body_length_is_refused(rest: Server, make_token, settings, framing: bytes) -> None:
    token = make_token("frame", ["A"]).token
    body = b'{"project_id": "A", "meta": {"t": "x"}}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    framing = framing.replace(b"%d", str(len(body)).encode())
    before = _sessions(settings.dsn)
    for path in (b"/v1/sessions", b"/mcp", b"/ui/sign-in"):
        head, answer = _raw(rest, b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                            + token.encode() + b"\r\nContent-Type: application/json\r\n" + framing + b"\r\n"
                            + (chunked if b"chunked" in framing else body))
        assert head.startswith(b"HTTP/1.1 400 "), head
        assert b"connection: close" in head.lower()
        assert b"request framing" in answer and b"an ambiguous body length is refused" in answer
    assert _sessions(settings.dsn) == before
    one_length = rest.call("POST", "/v1/sessions", token=token, raw=body)
    assert one_length.status == 201 and _sessions(settings.dsn) == before + 1


def test_content_length_twice_is_refused_whatever_the_http_parser() -> None:
    """h11 merges identical Content-Length headers and refuses differing ones itself; another server's
    parser may pass both on: the app refuses them too."""
    sent: list[dict] = []
    reached: list[bool] = []

    async def app(scope, receive, send) -> None:
        reached.append(True)

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/sessions", "headers": [
        (b"content-length", b"2"), (b"content-length", b"2")], "query_string": b""}
    asyncio.run(StrictFraming(app)(scope, receive, send))
    assert not reached and sent[0]["status"] == 400 and (b"connection", b"close") in sent[0]["headers"]
    assert b"Content-Length is given more than once" in sent[1]["body"]
    asyncio.run(StrictFraming(app)({**scope, "headers": [(b"content-length", b"2")]}, receive, send))
    assert reached == [True]
