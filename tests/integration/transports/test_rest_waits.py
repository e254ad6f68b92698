"""Bounded waits on REST: long-poll reads (`wait_seconds`) of every token share the server's one
append listener, so 200 of them waiting at once hold no more connections than the pool and one
LISTEN connection, and every one of them wakes on the append."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import psycopg
from test_rest import MSG, Server

from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

pytest_plugins = ["security_support"]

TOKENS = 12
WAITS = 200
POOL = 4
APP = "mcp-memory waits-test"


def server_connections(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND application_name LIKE %s", (APP + "%",)).fetchone()[0]


def waiting(registry: TokenRegistry) -> int:
    listener = registry.shared.appends.listener
    with listener._lock:
        return sum(len(events) for events in listener._waiters.values())


def test_200_long_polls_of_12_tokens_use_the_pool_and_one_listener(settings, owner_db: Database, make_token,
                                                                   service) -> None:
    sid = service.create_session("A").session_id
    service.append_message(sid, {**MSG, "append_id": "first"})
    tokens = [make_token(f"wait{i}", ["A"], read_only=True).token for i in range(TOKENS)]
    registry = TokenRegistry(settings, owner_db.dsn(), lambda s: build(replace(s), application_name=APP),
                             recheck_seconds=3600, pool_max=POOL)
    app = create_app(registry, HttpOptions(rate_limit=0, pool_max=POOL))
    with Server(app) as server, ThreadPoolExecutor(max_workers=WAITS) as clients:
        replies = [clients.submit(server.call, "GET", f"/v1/sessions/{sid}?after_seq=1&wait_seconds=50",
                                  token=tokens[i % TOKENS]) for i in range(WAITS)]
        deadline = time.monotonic() + 60
        while waiting(registry) < WAITS:  # every request is past its first read and waits on the listener
            assert time.monotonic() < deadline, f"only {waiting(registry)} of {WAITS} reads are waiting"
            assert not any(r.done() for r in replies), [r.result() for r in replies if r.done()][:3]
            time.sleep(0.05)
        held = server_connections(settings.dsn)
        assert held <= POOL + 1, f"{held} connections for {WAITS} waiting reads (pool {POOL} + 1 listener)"
        # a request that does not wait still gets a thread and an answer meanwhile
        assert server.call("GET", f"/v1/sessions/{sid}?after_seq=0", token=tokens[0]).status == 200
        started = time.monotonic()
        service.append_message(sid, {**MSG, "append_id": "second"})
        pages = [r.result(timeout=60) for r in replies]
        elapsed = time.monotonic() - started
    registry.close()
    assert all(p.status == 200 and [m["seq"] for m in p.body["messages"]] == [2] for p in pages)
    assert elapsed < 40, f"the waits woke after {elapsed:.1f}s, not on the append"  # the wait was 50 s
    print(f"{WAITS} waits of {TOKENS} tokens: {held} server connections; all woke {elapsed:.2f}s after the append")
