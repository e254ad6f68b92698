"""A real uvicorn server on 127.0.0.1 (an ephemeral port) in a thread, for the REST and UI tests, run as
`serve-http` runs it (proxy_headers off: X-Forwarded-For is the app's own business)."""

from __future__ import annotations

import threading
import time

import uvicorn


class Uvicorn:
    """Started on enter, stopped on exit; `url` and `port` are set once it listens."""

    def __init__(self, app) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="on",
                                                   proxy_headers=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
