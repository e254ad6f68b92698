"""Deterministic embedders for tests of semantic search: no model, no network.

HashEmbedder: a bag of words hashed into `dim` buckets, L2-normalised; a few words are first mapped
to a shared concept, so that "MQ" and "消息队列" land on the same bucket as a real model would put
them near each other. StubServer: an OpenAI-compatible /v1/embeddings endpoint on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONCEPTS = {"mq": "queue", "消息队列": "queue", "queue": "queue", "kafka": "queue", "rabbitmq": "queue",
            "timeout": "timeout", "超时": "timeout"}
_WORD = re.compile(r"消息队列|超时|[a-z0-9]+|[\u4e00-\u9fff]")


class HashEmbedder:
    def __init__(self, name: str = "hash-bow", dim: int = 64) -> None:
        self.name = name
        self.dim = dim
        self.calls = 0

    def vector(self, text: str) -> list[float]:
        values = [0.0] * self.dim
        for word in _WORD.findall(text.lower()):
            word = CONCEPTS.get(word, word)
            values[int(hashlib.sha1(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = math.sqrt(sum(v * v for v in values)) or 1.0
        return [v / norm if norm else 0.0 for v in values] if any(values) else [1.0] + [0.0] * (self.dim - 1)

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self.vector(t) for t in texts]


class StubServer:
    """Serves POST /v1/embeddings with HashEmbedder vectors; `fail = True` answers 500."""

    def __init__(self, embedder: HashEmbedder) -> None:
        self.embedder = embedder
        self.fail = False
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                if stub.fail or self.path != "/v1/embeddings":
                    self.send_response(500 if stub.fail else 404)
                    self.end_headers()
                    return
                data = [{"object": "embedding", "index": i, "embedding": v}
                        for i, v in enumerate(stub.embedder.embed(body["input"]))]
                answer = json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
