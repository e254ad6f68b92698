"""`mcp-memory ui`: serves the review pages on loopback and says where (the browser is not opened
with --no-browser); a second call finds the running server and only points at it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from test_ui import fetch


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_ui_command_serves_the_pages_on_loopback(fresh_db: str, profile: dict[str, str]) -> None:
    port = _free_port()
    argv = [sys.executable, "-m", "mcp_memory", "--dsn", fresh_db, "ui", "--no-browser", "--port", str(port)]
    proc = subprocess.Popen(argv, env=profile, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=1):
                    break
            except (urllib.error.URLError, OSError):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "mcp-memory ui did not start"
                time.sleep(0.2)
        reply = fetch(f"{base}/ui/")
        assert reply.status == 303 and reply.headers["location"].startswith("/ui/sign-in")
        page = fetch(f"{base}/ui/sign-in")
        assert page.status == 200 and "mcp-memory token create" in page.text
        again = subprocess.run(argv, check=False, env=profile, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 and f"review pages: {base}/ui/" in again.stderr
    finally:
        os.kill(proc.pid, signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=10)
    assert f"review pages: {base}/ui/" in err
