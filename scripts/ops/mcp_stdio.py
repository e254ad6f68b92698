"""A host's MCP server as agents run it (`mcp-memory serve` over stdio), driven with plain JSON-RPC
lines: the drills keep one server running across a database restore, as a host would, and see
whether its next tool call works."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


class McpHost:
    """One `mcp-memory serve` process; stopped by its own PID in close()."""

    def __init__(self, env: dict[str, str], stderr_path: Path) -> None:
        self._stderr = stderr_path.open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "mcp_memory", "serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd="/")
        self._next = 0
        self._buffer = b""
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "mcp-memory drill", "version": "1"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def _line(self, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise TimeoutError("the MCP server did not answer in time")
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise RuntimeError(f"the MCP server exited ({self.proc.poll()})")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def request(self, method: str, params: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self._line(deadline))
            if reply.get("id") == ident:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply["result"])

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool's structured result; a tool error raises with its text."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        if result.get("isError"):
            text = " ".join(part.get("text", "") for part in result.get("content", []))
            raise RuntimeError(f"{tool}: {text}")
        return dict(result.get("structuredContent") or {})

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()
