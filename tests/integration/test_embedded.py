"""The embedded default: started on demand, shared by concurrent processes, migrated, stoppable;
and a database that goes down and comes back without restarting the server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import ROOT_OPT_IN, embedded_home
from mcp import Client

from mcp_memory.config import load_settings
from mcp_memory.mcp.server import build_server
from mcp_memory.store import embedded
from mcp_memory.wiring import build


def _cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def home_env():
    with embedded_home() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")}
        env["MCP_MEMORY_HOME"] = str(home)
        env.update(ROOT_OPT_IN)
        try:
            yield env
        finally:
            embedded.stop(home / "mcp-memory" / "pg")


def test_two_processes_starting_at_once_share_one_server(home_env) -> None:
    code = ("from mcp_memory.wiring import build; from mcp_memory.config import load_settings; "
            "from mcp_memory.store import embedded; import json, os; s = load_settings(); svc = build(s); "
            "svc.create_session('p'); print(json.dumps(embedded.status(s.embedded_dir).pid)); svc.db.close()")
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: subprocess.run([sys.executable, "-c", code], env=home_env,
                                                      capture_output=True, text=True, timeout=120), range(4)))
    assert all(r.returncode == 0 for r in runs), [r.stderr[-500:] for r in runs]
    pids = {json.loads(r.stdout) for r in runs}
    assert len(pids) == 1 and None not in pids
    status = json.loads(_cli(home_env, "doctor", "--json").stdout)
    assert status["database"]["kind"] == "embedded" and status["database"]["schema_version"] >= 1
    assert status["database"]["pgvector"] is True
    sessions = json.loads(_cli(home_env, "sessions", "--json").stdout)["sessions"]
    assert len(sessions) == 4  # all four processes wrote to the same database


def test_db_stop_and_restart_on_demand(home_env) -> None:
    assert _cli(home_env, "db", "migrate").returncode == 0
    pgdir = load_settings(environ=home_env).embedded_dir
    assert embedded.status(pgdir).running
    stopped = _cli(home_env, "db", "stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not embedded.status(pgdir).running
    assert _cli(home_env, "db", "stop").stdout.strip() == "embedded server was not running"
    assert _cli(home_env, "sessions").returncode == 0  # starts again on demand
    assert embedded.status(pgdir).running


@pytest.mark.anyio
async def test_database_down_then_back_without_restarting_the_server(home_env) -> None:
    pgdir = load_settings(environ=home_env).embedded_dir
    dsn = embedded.ensure_running(pgdir, allow_root=bool(ROOT_OPT_IN))
    settings = load_settings(dsn=dsn, environ=home_env)  # used as an external server: no auto-start
    service = build(settings)
    try:
        async with Client(build_server(lambda: service), mode="legacy") as client:
            ok = await client.call_tool("create_session", {"project_id": "p"})
            assert not ok.is_error
            embedded.stop(pgdir)
            down = await client.call_tool("create_session", {"project_id": "p"})
            assert down.is_error and down.content[0].text.startswith("[unavailable] database unreachable")
            embedded.ensure_running(pgdir, allow_root=bool(ROOT_OPT_IN))
            back = await client.call_tool("create_session", {"project_id": "p"})
            assert not back.is_error, back.content[0].text
    finally:
        service.db.close()
