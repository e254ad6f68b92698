"""Hostile bodies up to the REST limit (32 MiB) cost bounded time and never stall other clients.

Each body below once cost time quadratic in its size (an unterminated string of `\\"` pairs: 60 KB
held the event loop 36 s) or seconds of parsing (ten million empty lists). While two clients send
them to a real uvicorn server without pause, `/healthz` must answer every poll within a second.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator

import pytest
from http_support import Uvicorn

from mcp_memory import jsoncheck
from mcp_memory.config import Settings
from mcp_memory.errors import Invalid
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

pytest_plugins = ["security_support"]

LIMIT = HttpOptions().max_body_bytes
HEALTHZ_BOUND = 1.0  # seconds, the bound the server promises
SHAPE_BOUND = 5.0  # seconds for one check at the limit; measured ≤ 0.4 s, generous for a loaded machine


def _hostile(size: int) -> dict[str, bytes]:
    pairs = (size - 64) // 2
    return {
        "unterminated escapes": b'{"project_id": "' + b'\\"' * pairs,
        "escapes then no end": b'{"project_id": "p", "meta": {"t": "' + b'\\"' * pairs + b'"',
        "empty lists": b"[" + b"[]," * ((size - 8) // 3) + b"[]]",
        "empty strings": b"[" + b'"",' * ((size - 8) // 3) + b'""]',
        "quotes": b'"' * (size - 8),
        "deep": b"[" * (size // 2 - 4) + b"]" * (size // 2 - 4),
        "backslashes": b'["' + b"\\" * (size - 8) + b'"',
    }


@pytest.mark.parametrize("name", list(_hostile(1024)))
def test_each_hostile_body_is_refused_in_bounded_time(name: str) -> None:
    raw = _hostile(LIMIT)[name]
    assert len(raw) <= LIMIT
    started = time.perf_counter()
    with pytest.raises(Invalid, match=r"^body"):
        jsoncheck.loads(raw, limit=LIMIT, what="body")
    elapsed = time.perf_counter() - started
    print(f"{name}: {len(raw) / 2**20:.1f} MiB refused in {elapsed:.3f} s")
    assert elapsed < SHAPE_BOUND


def test_the_shape_check_is_linear_on_escape_pairs() -> None:
    """The 60 KB body that once took 36 s, and one a hundred times larger."""
    for size in (60_000, 6_000_000):
        started = time.perf_counter()
        jsoncheck.check_shape(b'"' + b'\\"' * (size // 2))
        assert time.perf_counter() - started < SHAPE_BOUND


def test_too_many_values_is_named() -> None:
    with pytest.raises(Invalid, match=r"^body: holds more than 10 values"):
        jsoncheck.loads(b"[" + b"1," * 11 + b"1]", limit=1000, what="body", max_values=10)
    assert jsoncheck.loads(b"[" + b"1," * 5 + b"1]", limit=1000, what="body", max_values=10) == [1] * 6


class _Client:
    def __init__(self, port: int) -> None:
        self.port = port

    def request(self, method: str, path: str, *, body: bytes | None = None, token: str | None = None,
                timeout: float = 120) -> int:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()


@pytest.fixture
def server(settings: Settings, owner_db: Database) -> Iterator[_Client]:
    registry = TokenRegistry(settings, owner_db.dsn(), lambda s: build(s, application_name="mcp-memory hostile"),
                             recheck_seconds=60)
    with Uvicorn(create_app(registry, HttpOptions(rate_limit=0))) as running:
        yield _Client(running.port)


def test_healthz_answers_within_a_second_during_hostile_bodies(server: _Client, make_token) -> None:
    token = make_token("hostile", ["A"]).token
    bodies = list(_hostile(LIMIT).values())
    statuses: list[int] = []
    done = threading.Event()

    def send(paths: list[str]) -> None:
        try:
            for body in bodies:
                for path in paths:
                    statuses.append(server.request("POST", path, body=body, token=token))
        finally:
            done.set()

    assert server.request("GET", "/healthz") == 200
    senders = [threading.Thread(target=send, args=(paths,), daemon=True)
               for paths in (["/v1/sessions"], ["/mcp"])]
    for sender in senders:
        sender.start()
    latencies = []
    while not done.is_set() or any(s.is_alive() for s in senders):
        started = time.perf_counter()
        assert server.request("GET", "/healthz", timeout=30) == 200
        latencies.append(time.perf_counter() - started)
        time.sleep(0.05)
    for sender in senders:
        sender.join()
    print(f"healthz: {len(latencies)} polls, slowest {max(latencies):.3f} s; bodies answered {statuses}")
    assert len(statuses) == 2 * len(bodies) and set(statuses) == {400}
    assert len(latencies) >= 10 and max(latencies) <= HEALTHZ_BOUND
