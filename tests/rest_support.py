"""The REST app on a real uvicorn server with a small JSON client, shared by the REST, view,
transfer and metrics tests."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from http_support import Uvicorn

from mcp_memory.config import Settings
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.store.db import Database
from mcp_memory.wiring import build


@dataclass
class Reply:
    status: int
    body: dict
    headers: dict


class Server(Uvicorn):
    """The REST app on a real uvicorn server, with a small client."""

    def call(self, method: str, path: str, *, token: str | None = None, body: object = None,
             raw: bytes | None = None, headers: dict | None = None) -> Reply:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", **(headers or {})})
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return Reply(response.status, json.loads(response.read() or b"null"), _lower(response.headers))
        except urllib.error.HTTPError as error:
            with error:  # an error answer holds its connection until closed
                return Reply(error.code, json.loads(error.read() or b"null"), _lower(error.headers))


def _lower(headers) -> dict:
    return {k.lower(): v for k, v in headers.items()}


@pytest.fixture
def rest(settings: Settings, owner_db: Database) -> Iterator[Server]:
    """serve-http's app on a real server, tokens checked against the test database."""
    registry = TokenRegistry(settings, owner_db.dsn(), lambda s: build(s, application_name="mcp-memory rest-test"),
                             recheck_seconds=0)
    app = create_app(registry, HttpOptions(max_body_bytes=64 * 1024, rate_limit=0))
    with Server(app) as server:
        yield server
