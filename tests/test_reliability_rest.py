"""REST under load and attack: 200 tokens on a bounded number of connections, a forged-token flood
while the real token is served, and hostile bodies, paths and queries answered 4xx (never 500)."""

from __future__ import annotations

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg import sql
from test_rest import Server

from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.http.ratelimit import RateLimiter
from mcp_memory.security import tokens
from mcp_memory.wiring import build

pytest_plugins = ["test_security_support"]
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
