"""The REST app on a real uvicorn server with a small JSON client, shared by the REST, view,
transfer and metrics tests."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from http_support import Uvicorn


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
            return Reply(error.code, json.loads(error.read() or b"null"), _lower(error.headers))


def _lower(headers) -> dict:
    return {k.lower(): v for k, v in headers.items()}
