"""Our Codex rollouts against the real `codex` binary (npm `@openai/codex@0.169.0`), offline.

`codex app-server` speaks JSON-RPC on stdio; its `thread/list` is the listing behind the `codex resume`
picker and `thread/read` replays a rollout into turns, neither needs a model. Each test uses a throwaway
HOME and CODEX_HOME. Skipped without the binary.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import NeutralSession, WriteOptions, adapter_for
from mcp_memory.agents.codex import install as codex_integration
from mcp_memory.schema import MessageIn

REAL = (
    FIXTURES / "real" / "codex" / "en" / "sessions"
)
CONFIG = """check_for_update_on_startup = false
[analytics]
enabled = false
[features]
plugins = false
remote_plugin = false
apps = false
in_app_updates = false
"""
pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not on PATH"),
]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home, codex_home = tmp_path / "home", tmp_path / "codex"
    home.mkdir()
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(CONFIG)
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "RUST_LOG": "error",
    }


class AppServer:
    """A `codex app-server` child process, killed on exit."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            ["codex", "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            text=True,
        )
        self.next_id = 0

    def __enter__(self) -> Self:
        self.call("initialize", {"clientInfo": {"name": "mcp-memory-tests", "version": "1"}})
        self._send({"jsonrpc": "2.0", "method": "initialized"})
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
        for pipe in (self.process.stdin, self.process.stdout):  # closed here, not left to the GC
            if pipe is not None:
                pipe.close()

    def _send(self, message: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def call(self, method: str, params: dict, timeout: float = 20) -> dict:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.5)
            if not ready:
                continue
            line = self.process.stdout.readline()
            if not line:
                break
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]
        raise AssertionError(f"no answer to {method} within {timeout}s")

    def listed(self, cwd: Path, thread_id: str, source_kinds: list[str] | None = None) -> dict | None:
        """thread/list filtered by cwd (default sources: the interactive ones `codex resume` shows),
        retried while the state DB backfills the rollouts."""
        params = {"cwd": str(cwd), "modelProviders": [], "sourceKinds": source_kinds}
        for _ in range(20):
            threads = self.call("thread/list", params)["data"]
            found = next((t for t in threads if t["id"] == thread_id), None)
            if found:
                return found
            time.sleep(0.5)
        return None


def sample() -> NeutralSession:
    when = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    messages = [
        MessageIn(role="user", content="Is 200 QPS too much for one Postgres?", created_at=when),
        MessageIn(
            role="assistant",
            content="Let me check the notes.",
            thinking={"content": "Need the load numbers."},
            tool_calls=[
                {"id": "toolu_1", "function": {"name": "Read", "arguments": '{"file_path": "notes.md"}'}}
            ],
            created_at=when,
        ),
        MessageIn(role="tool", tool_call_id="toolu_1", content="Peak 200 QPS", created_at=when),
        MessageIn(role="assistant", content="No queue needed.", created_at=when),
    ]
    return NeutralSession(agent="claude-code", native_id="interop-1", messages=messages, meta={})


def test_codex_lists_and_replays_a_foreign_session(env, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    written = adapter_for("codex").install(sample(), cwd=work, env=env, options=WriteOptions(thinking="text"))
    with AppServer(env, work) as server:
        thread = server.listed(work, written.native_id)
        assert thread is not None, "codex did not list the written rollout"
        assert thread["preview"] == "Is 200 QPS too much for one Postgres?" and thread["source"] == "cli"
        turns = server.call("thread/read", {"threadId": written.native_id, "includeTurns": True})["thread"][
            "turns"
        ]
    items = [item for turn in turns for item in turn["items"]]
    assert [i.get("text") for i in items if i["type"] == "agentMessage"] == [
        "Let me check the notes.",
        "No queue needed.",
    ]
    assert [i["summary"] for i in items if i["type"] == "reasoning"] == [["Need the load numbers."]]


def test_codex_lists_a_real_rollout_after_our_round_trip(env, tmp_path):
    adapter = adapter_for("codex")
    (session,) = adapter.read([REAL])
    work = tmp_path / "work"
    work.mkdir()
    written = adapter.install(session, cwd=work, env=env, options=WriteOptions())
    assert written.native_id == session.native_id
    with AppServer(env, work) as server:
        thread = server.listed(work, session.native_id, ["exec"])  # written by `codex exec`
        assert thread is not None and thread["preview"].startswith("Our order module peaks at 200 QPS")


def test_codex_reads_our_mcp_server_entry(env, tmp_path):
    codex_integration.register(
        scope="user", command=["mcp-memory"], env={"MCP_MEMORY_DSN": "x"}, cwd=tmp_path, environ=env
    )
    result = subprocess.run(
        ["codex", "mcp", "list", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    servers = {entry["name"]: entry for entry in json.loads(result.stdout)}
    assert servers["mcp-memory"]["transport"]["command"] == "mcp-memory"
    assert servers["mcp-memory"]["transport"]["args"] == ["serve"]
