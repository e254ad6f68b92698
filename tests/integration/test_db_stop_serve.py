"""`mcp-memory db stop` under a running `mcp-memory serve` (a real MCP client over stdio, on a profile
with its own embedded server): the tool calls after the stop start the server again on the same data,
and a call made while the stop runs waits for it and then starts the server, or says [unavailable]."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from conftest import ROOT_OPT_IN, embedded_home
from mcp import Client, StdioServerParameters

from mcp_memory.config import load_settings
from mcp_memory.store import embedded

pytestmark = pytest.mark.anyio


@pytest.fixture
def home_env() -> Iterator[dict[str, str]]:
    with embedded_home() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")}
        env.update(ROOT_OPT_IN, MCP_MEMORY_HOME=str(home))
        try:
            yield env
        finally:
            embedded.stop(load_settings(environ=env).embedded_dir)


def _db_stop(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", "db", "stop"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)


async def _append(client: Client, sid: str, text: str):
    return await client.call_tool("append_message", {"session_id": sid, "message": {"role": "user", "content": text}})


async def test_serve_starts_the_server_again_after_db_stop(home_env) -> None:
    pgdir = load_settings(environ=home_env).embedded_dir
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_memory", "serve"], env=home_env)
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        sid = (await client.call_tool("create_session", {"project_id": "stop"})).structured_content["session_id"]
        assert not (await _append(client, sid, "before the stop")).is_error
        first_pid = embedded.status(pgdir).pid
        stopped = _db_stop(home_env)
        assert stopped.returncode == 0, stopped.stderr
        assert "starts again" in stopped.stdout and not embedded.status(pgdir).running
        await asyncio.sleep(1.2)  # a host's pause between two calls
        started = time.monotonic()
        after = await _append(client, sid, "after the stop")
        took = time.monotonic() - started
        assert not after.is_error, after.content[0].text  # the next call starts it again
        second_pid = embedded.status(pgdir).pid
        assert second_pid is not None and second_pid != first_pid
        page = await client.call_tool("read_session", {"session_id": sid})
        assert [m["content"] for m in page.structured_content["messages"]] == ["before the stop", "after the stop"]
        print(f"\nfirst call after `db stop`: {took:.2f} s (server started again, pid {first_pid} → {second_pid})")

        # a call that arrives while the stop runs: it fails [unavailable] or waits for the stop, never hangs;
        # every call after it works
        stopping = subprocess.Popen([sys.executable, "-m", "mcp_memory", "db", "stop"], env=home_env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            while embedded.status(pgdir).running and stopping.poll() is None:
                await asyncio.sleep(0.01)
            during = await _append(client, sid, "during the stop")
        finally:
            out, err = stopping.communicate(timeout=120)
        assert "Traceback" not in err, err
        if during.is_error:
            assert during.content[0].text.startswith("[unavailable]"), during.content[0].text
        later = [await _append(client, sid, f"later {i}") for i in range(3)]
        assert not any(r.is_error for r in later), [r.content[0].text for r in later]
        assert embedded.status(pgdir).running
        seqs = [r.structured_content["seq"] for r in later]
        assert seqs == list(range(seqs[0], seqs[0] + 3)) and seqs[0] == (3 if during.is_error else 4)
        print(f"call during the stop: {'[unavailable]' if during.is_error else 'waited and succeeded'}; "
              f"db stop said: {out.strip() or err.strip()}")
