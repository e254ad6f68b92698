"""REST under load and attack: 200 tokens on a bounded number of connections, a forged-token flood
while the real token is served, and hostile bodies, paths and queries answered 4xx (never 500)."""

from __future__ import annotations

import http.client
import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import psycopg
import pytest
from psycopg import sql
from rest_support import Server

from mcp_memory.errors import ConfigError
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.http.proxies import TrustedProxies, parse_networks
from mcp_memory.http.ratelimit import RateLimiter
from mcp_memory.http.server import http_options
from mcp_memory.security import tokens
from mcp_memory.wiring import build

pytest_plugins = ["security_support"]
TOKENS = 200
POOL = 6


def _app_name() -> str:
    return f"mm-rel-{uuid.uuid4().hex[:8]}"


def _registry(settings, owner_db, name: str, **kwargs) -> TokenRegistry:
    return TokenRegistry(settings, owner_db.dsn(), lambda s: build(s, application_name=name), **kwargs)


@pytest.fixture
def many_tokens(owner_db, admin_dsn):
    """200 token roles (half on project A, half on B), created in one transaction, dropped after."""
    prefix = f"mmtest_many_{uuid.uuid4().hex[:6]}"
    made: list[tokens.CreatedToken] = []
    for i in range(TOKENS):
        made.append(tokens.create(owner_db, name=f"{prefix}_{i}", projects=["A" if i % 2 == 0 else "B"]))
    try:
        yield made
    finally:
        owner_db.close()
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            for created in made:
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(created.role)))


def _connections(admin_dsn: str, name: str) -> int:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s",
                            (name + "%",)).fetchone()[0]


def test_200_tokens_share_a_bounded_pool(settings, owner_db, admin_dsn, service, many_tokens) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        max_connections = int(conn.execute("SHOW max_connections").fetchone()[0])
    assert max_connections < TOKENS or max_connections > 100  # with ≤ 100 slots, one per token cannot work
    for project in ("A", "B"):
        service.create_session(project, {"title": project})
    name = _app_name()
    registry = _registry(settings, owner_db, name, recheck_seconds=60, pool_max=POOL)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _connections(admin_dsn, name))
            done.wait(0.05)

    sampler = threading.Thread(target=sample)
    with Server(create_app(registry, HttpOptions(rate_limit=0, pool_max=POOL))) as server:
        sampler.start()
        try:
            def visit(created: tokens.CreatedToken) -> tuple[int, list[str], str]:
                reply = server.call("GET", "/v1/sessions", token=created.token)
                return reply.status, [s["project_id"] for s in reply.body["sessions"]], created.projects[0]

            with ThreadPoolExecutor(16) as pool:
                results = list(pool.map(visit, many_tokens + many_tokens[:20]))
        finally:
            done.set()
            sampler.join()
    assert [status for status, _, _ in results] == [200] * (TOKENS + 20)
    assert all(seen == [project] for _, seen, project in results)  # each token sees only its project
    print(f"\n{TOKENS} tokens, max_connections={max_connections}: at most {peak[0]} connections used")
    assert 1 <= peak[0] <= POOL


def test_forged_flood_does_not_lock_out_the_real_token(settings, owner_db, make_token, service) -> None:
    service.create_session("A", {"title": "a"})
    real = make_token("real", ["A"]).token
    registry = _registry(settings, owner_db, _app_name(), recheck_seconds=60)
    options = HttpOptions(rate_limit=20, burst=40, auth_failures_per_second=1, auth_failure_burst=5)
    with Server(create_app(registry, options)) as server:
        assert server.call("GET", "/v1/sessions", token=real).status == 200
        stop = threading.Event()
        forged_statuses: list[int] = []

        def flood() -> None:
            while not stop.is_set():
                role = real.split(".")[1] if len(forged_statuses) % 2 else f"forged{len(forged_statuses)}"
                forged = f"mmt.{role}.{uuid.uuid4().hex}{uuid.uuid4().hex[:11]}"
                forged_statuses.append(server.call("GET", "/v1/sessions", token=forged).status)

        flooders = [threading.Thread(target=flood) for _ in range(3)]
        for t in flooders:
            t.start()
        try:
            real_statuses = []
            for _ in range(30):
                real_statuses.append(server.call("GET", "/v1/sessions", token=real).status)
                stop.wait(0.05)
        finally:
            stop.set()
            for t in flooders:
                t.join()
    assert real_statuses == [200] * 30
    assert set(forged_statuses) <= {401, 429} and 429 in forged_statuses and 401 in forged_statuses
    print(f"\nreal token: 30/30 served during {len(forged_statuses)} forged requests")


def _status(server, method: str, path: str, *, headers: dict, body: object = None) -> int:
    """The status of one request, redirects not followed (the UI answers a bad cookie with 303)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        connection.request(method, path, body=data, headers={"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"}
MCP_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_sessions", "arguments": {}}}


_UI_SESSIONS: dict[tuple[int, str], str] = {}


def _sign_in(server, token: str, extra: dict) -> tuple[int, str | None]:
    """The sign-in form's status for `token`, and the session cookie it set (None when refused)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request("POST", "/ui/sign-in", body=f"token={token}",
                           headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": server.url, **extra})
        response = connection.getresponse()
        response.read()
        cookie = response.getheader("set-cookie")
        status = 200 if response.status == 303 else response.status
        return status, (cookie.split(";")[0] if cookie and response.status == 303 else None)
    finally:
        connection.close()


def _request(server, kind: str, token: str, extra: dict | None = None) -> int:
    """One request of `kind` (rest, mcp, ui) carrying `token` as a bearer token or the UI cookie."""
    extra = extra or {}
    if kind == "ui":  # the sign-in form, then the page with the session cookie it set
        cookie = _UI_SESSIONS.get((server.port, token))
        if cookie is None:
            status, cookie = _sign_in(server, token, extra)
            if cookie is None:
                return status
            _UI_SESSIONS[(server.port, token)] = cookie
        return _status(server, "GET", "/ui/", headers={"Cookie": cookie, **extra})
    bearer = {"Authorization": f"Bearer {token}", **extra}
    if kind == "mcp":
        return _status(server, "POST", "/mcp", headers={**bearer, **MCP_HEADERS}, body=MCP_CALL)
    return _status(server, "GET", "/v1/sessions", headers=bearer)


def test_forged_tokens_and_cookies_for_the_real_role_cost_the_real_token_nothing(settings, owner_db, make_token,
                                                                                  service) -> None:
    """The lock-out: forged bearer tokens and sign-ins naming the real token's role, from
    the real token's own address (and with made-up X-Forwarded-For), while the real token, in use
    before the flood, works on REST, /mcp and /ui and its verification cache keeps expiring (recheck
    every 0.2 s: each expiry is a new database verification while its address and role are spent)."""
    service.create_session("A", {"title": "a"})
    real = make_token("real", ["A"]).token
    role = tokens.parse_token(real)
    registry = _registry(settings, owner_db, _app_name(), recheck_seconds=0.2)
    options = HttpOptions(rate_limit=20, burst=40, auth_failures_per_second=1, auth_failure_burst=5)
    with Server(create_app(registry, options)) as server:
        assert _request(server, "rest", real) == 200
        stop = threading.Event()
        forged_statuses: list[int] = []

        def flood(kind: str) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                forged = f"mmt.{role}.{uuid.uuid4().hex}{uuid.uuid4().hex[:11]}"
                spoof = {"X-Forwarded-For": f"198.51.100.{n % 250}"} if n % 2 else {}
                forged_statuses.append(_request(server, kind, forged, spoof))

        flooders = [threading.Thread(target=flood, args=(kind,)) for kind in ("ui", "ui", "rest", "mcp")]
        for t in flooders:
            t.start()
        try:
            stop.wait(0.5)  # the failure budget of (127.0.0.1, role) is spent before the real token comes
            real_statuses: dict[str, list[int]] = {"rest": [], "mcp": [], "ui": []}
            for i in range(90):
                kind = ("rest", "mcp", "ui")[i % 3]
                real_statuses[kind].append(_request(server, kind, real))
                stop.wait(0.03)
        finally:
            stop.set()
            for t in flooders:
                t.join()
    served = sum(status == 200 for statuses in real_statuses.values() for status in statuses)
    print(f"\nreal token: {served}/90 served (REST, /mcp, /ui) during {len(forged_statuses)} forged requests "
          f"({forged_statuses.count(429)} answered 429)")
    assert served >= 0.9 * 90, real_statuses
    assert all(statuses.count(200) >= 0.9 * 30 for statuses in real_statuses.values()), real_statuses
    assert 429 in forged_statuses and 200 not in forged_statuses


def test_x_forwarded_for_is_believed_only_from_trusted_proxies(settings, owner_db, make_token) -> None:
    role = tokens.parse_token(make_token("xff", ["A"]).token)

    def forged() -> str:
        return f"mmt.{role}.{uuid.uuid4().hex}{uuid.uuid4().hex[:11]}"

    def attempts(server, addresses: list[str]) -> list[tuple[int, str]]:
        out = []
        for address in addresses:
            reply = server.call("GET", "/v1/sessions", token=forged(), headers={"X-Forwarded-For": address})
            out.append((reply.status, reply.body["error"]["message"]))
        return out

    options = HttpOptions(auth_failures_per_second=0.01, auth_failure_burst=3)
    spread = [f"203.0.113.{i}" for i in range(8)]
    registry = _registry(settings, owner_db, _app_name(), recheck_seconds=60)
    with Server(create_app(registry, options)) as server:  # no trusted proxy: loopback's header is ignored
        untrusted = attempts(server, spread)
    assert [status for status, _ in untrusted] == [401] * 3 + [429] * 5
    assert all("from 127.0.0.1;" in message for _, message in untrusted[3:])

    trusted = replace(options, trusted_proxies=parse_networks(["127.0.0.1/32", "10.0.0.0/8"]))
    registry = _registry(settings, owner_db, _app_name(), recheck_seconds=60)
    with Server(create_app(registry, trusted)) as server:
        assert [status for status, _ in attempts(server, spread)] == [401] * 8  # one budget per client
        same = attempts(server, ["198.51.100.1, 10.1.2.3"] * 4 + ["203.0.113.200, 198.51.100.1"])
    assert [status for status, _ in same] == [401] * 3 + [429, 429]
    assert "from 198.51.100.1;" in same[3][1] and "from 198.51.100.1;" in same[4][1]


def test_the_client_address_is_read_from_the_right_of_x_forwarded_for() -> None:
    none = TrustedProxies()
    assert none.client("127.0.0.1", "1.2.3.4") == "127.0.0.1"  # default: never believed, loopback included
    proxies = TrustedProxies(parse_networks(["127.0.0.1", "10.0.0.0/8", "::1"]))
    assert proxies.client("127.0.0.1", "1.2.3.4") == "1.2.3.4"
    assert proxies.client("127.0.0.1", "6.6.6.6, 1.2.3.4, 10.0.0.7") == "1.2.3.4"  # left of the client: the client's
    assert proxies.client("192.0.2.9", "1.2.3.4") == "192.0.2.9"  # the peer is not a proxy we trust
    assert proxies.client("127.0.0.1", "not-an-address") == "127.0.0.1"
    assert proxies.client("127.0.0.1", "10.0.0.1, 10.0.0.2") == "10.0.0.1"
    assert proxies.client("::1", "2001:db8::1") == "2001:db8::1"
    assert proxies.client("127.0.0.1", ",".join(["10.0.0.1"] * 10_000 + ["1.2.3.4"])) == "1.2.3.4"
    with pytest.raises(ValueError, match=r"trusted_proxies: 'ten' is not an IP address"):
        parse_networks(["ten"])


def test_trusted_proxies_config(settings) -> None:
    def options(http: dict) -> HttpOptions:
        return http_options(replace(settings, raw={**settings.raw, "http": http}), "127.0.0.1")

    assert options({}).trusted_proxies == ()
    assert [str(n) for n in options({"trusted_proxies": ["10.0.0.5", "fd00::/8"]}).trusted_proxies] == \
        ["10.0.0.5/32", "fd00::/8"]
    with pytest.raises(ConfigError, match=r"http\.trusted_proxies"):
        options({"trusted_proxies": "10.0.0.5"})
    with pytest.raises(ConfigError, match=r"http\.trusted_proxies: '10\.0\.0\.300'"):
        options({"trusted_proxies": ["10.0.0.300"]})


def test_failure_buckets_are_bounded() -> None:
    limiter = RateLimiter(1, 2, max_keys=100)
    for i in range(5000):
        limiter.take(f"10.0.{i // 256}.{i % 256}")
    assert len(limiter) == 100
    assert limiter.blocked("never-seen") == 0 and len(limiter) == 100  # looking does not add a bucket


def test_hostile_requests_get_4xx(settings, owner_db, make_token, service) -> None:
    sid = service.create_session("A", {"title": "a"}).session_id
    hidden = service.create_session("B", {"title": "b"}).session_id
    hidden_snapshot = service.create_snapshot(hidden, "b").snapshot_id
    token = make_token("hostile", ["A"]).token
    registry = _registry(settings, owner_db, _app_name(), recheck_seconds=60)
    with Server(create_app(registry, HttpOptions(rate_limit=0, max_body_bytes=256 * 1024))) as server:
        def call(method: str, path: str, raw: bytes | None = None):
            return server.call(method, path, token=token, raw=raw)

        deep = b'{"project_id": "A", "meta": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5001
        cases = {
            "deep": call("POST", "/v1/sessions", deep),
            "deep list": call("POST", f"/v1/sessions/{sid}/messages", b"[" * 5000 + b"]" * 5000),
            "surrogate": call("POST", "/v1/sessions", b'{"project_id": "A", "meta": {"title": "\\ud800"}}'),
            "surrogate message": call("POST", f"/v1/sessions/{sid}/messages",
                                      b'{"role": "user", "content": "\\udfff x"}'),
            "long id": call("POST", f"/v1/snapshots/{'9' * 5000}/fork"),
            "invisible fork": call("POST", f"/v1/snapshots/{hidden_snapshot}/fork"),
            "since": call("GET", "/v1/search?q=x&since=99999999999d"),
            "bad json": call("POST", "/v1/sessions", b'{"project_id": NaN'),
        }
    statuses = {name: reply.status for name, reply in cases.items()}
    assert all(400 <= s < 500 for s in statuses.values()), statuses
    assert statuses["invisible fork"] == 404
    for name in ("deep", "surrogate", "surrogate message", "since", "long id"):
        body = cases[name].body
        assert body["error"]["code"] in ("invalid", "not_found"), (name, body)
    assert "meta" in cases["deep"].body["error"]["message"]
    assert "meta.title" in cases["surrogate"].body["error"]["message"]
    assert "content" in cases["surrogate message"].body["error"]["message"]
    assert "since" in cases["since"].body["error"]["message"]
    assert json.dumps(cases["long id"].body)


def test_hypothesis_deep_and_hostile_bodies_never_5xx(settings, owner_db, make_token, service) -> None:
    from hypothesis import HealthCheck, given
    from hypothesis import settings as hsettings
    from hypothesis import strategies as st
    from test_hostile_input import JSON_VALUES, _nest

    sid = service.create_session("A", {"title": "a"}).session_id
    token = make_token("deep", ["A"]).token
    registry = _registry(settings, owner_db, _app_name(), recheck_seconds=60)
    targets = [("POST", "/v1/sessions"), ("POST", f"/v1/sessions/{sid}/messages"), ("PATCH", f"/v1/sessions/{sid}"),
               ("POST", "/v1/snapshots"), ("POST", "/v1/decisions")]
    with Server(create_app(registry, HttpOptions(rate_limit=0, max_body_bytes=256 * 1024))) as server:
        @hsettings(max_examples=40, deadline=None, database=None, derandomize=True,
                   suppress_health_check=list(HealthCheck))
        @given(value=JSON_VALUES, depth=st.integers(0, 6000), kind=st.sampled_from(["list", "dict"]),
               target=st.sampled_from(targets), field=st.sampled_from(["meta", "content", "summary", "commit_msg"]))
        def check(value, depth, kind, target, field) -> None:
            body = f'{{"project_id": "A", "session_id": "{sid}", "role": "user", "decision_type": "t", ' \
                   f'"{field}": {_nest(value, depth, kind)}}}'
            reply = server.call(target[0], target[1], token=token, raw=body.encode())
            assert reply.status < 500, (target, depth, reply.body)
            if reply.status >= 400:
                assert reply.body["error"]["code"] and reply.body["error"]["message"]

        check()
