"""Every wait is bounded: a frozen server (SIGSTOP of every process of a scratch PostgreSQL started
here, SIGCONT always afterwards) is answered [unavailable] within the call deadline; lock waits end
at lock_timeout; the capture hook with a frozen embedded server exits in time and spools, and a
later hook delivers the spool; after `db stop` an attached process starts the server again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import psutil
import psycopg
import pytest
from agent_fixtures import claude_transcript
from conftest import ROOT_OPT_IN, embedded_home

from mcp_memory.config import load_settings
from mcp_memory.errors import Unavailable
from mcp_memory.store import embedded
from mcp_memory.wiring import build

DEADLINE = 2.0


@pytest.fixture
def scratch_home() -> Iterator[dict[str, str]]:
    """A profile on its own embedded server (started here, stopped afterwards)."""
    with embedded_home() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")}
        env.update(ROOT_OPT_IN, MCP_MEMORY_HOME=str(home))
        pgdir = load_settings(environ=env).embedded_dir
        embedded.ensure_running(pgdir, allow_root=bool(ROOT_OPT_IN))
        try:
            yield env
        finally:
            embedded.stop(pgdir)


@contextmanager
def frozen(pgdir: Path) -> Iterator[list[int]]:
    """SIGSTOP the postmaster and all its children; SIGCONT them whatever happens."""
    postmaster = psutil.Process(embedded.status(pgdir).pid)
    procs = [postmaster, *postmaster.children(recursive=True)]
    stopped: list[psutil.Process] = []
    try:
        for proc in procs:
            proc.send_signal(signal.SIGSTOP)
            stopped.append(proc)
        yield [p.pid for p in stopped]
    finally:
        for proc in stopped:
            try:
                proc.send_signal(signal.SIGCONT)
            except psutil.NoSuchProcess:
                pass


def _fast_settings(env: dict[str, str], dsn: str):
    return replace(load_settings(dsn=dsn, environ=env), connect_timeout=1.0, statement_timeout=1.0,
                   lock_timeout=0.5, call_timeout=DEADLINE)


def _timed(fn) -> tuple[BaseException | None, float]:
    started = time.monotonic()
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - returned to the test
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


def test_frozen_database_is_answered_within_the_deadline(scratch_home) -> None:
    pgdir = load_settings(environ=scratch_home).embedded_dir
    dsn = embedded.status(pgdir).uri
    service = build(_fast_settings(scratch_home, dsn))
    try:
        sid = service.create_session("p").session_id
        service.append_message(sid, {"role": "user", "content": "before"})
        with frozen(pgdir):
            time.sleep(1.2)  # past the pool's idle check: the call itself must meet the frozen server
            first, took_first = _timed(lambda: service.append_message(sid, {"role": "user", "content": "frozen"}))
            again, took_again = _timed(lambda: service.read_session(sid))  # a fresh connection this time
        print(f"\nfrozen server: answered after {took_first * 1000:.0f} ms, then {took_again * 1000:.0f} ms "
              f"(call_timeout {DEADLINE:g} s, connect_timeout 1 s)")
        assert isinstance(first, Unavailable) and first.render().startswith("[unavailable]"), first
        assert isinstance(again, Unavailable), again
        assert took_first < DEADLINE + 1.0 and took_again < DEADLINE + 1.0
        for _ in range(20):  # thawed: the next calls work again
            try:
                assert service.read_session(sid).messages[0].content == "before"
                break
            except Unavailable:
                time.sleep(0.25)
        else:
            pytest.fail("the service did not recover after the server was thawed")
    finally:
        service.db.close()


def test_lock_wait_ends_at_lock_timeout(settings, service) -> None:
    sid = service.create_session("p").session_id
    quick = build(replace(settings, lock_timeout=0.5, statement_timeout=3.0, call_timeout=5.0))
    try:
        with psycopg.connect(settings.dsn) as holder:
            holder.execute("SELECT 1 FROM sessions WHERE session_id = %s FOR UPDATE", (sid,))
            error, took = _timed(lambda: quick.append_message(sid, {"role": "user", "content": "x"}))
        assert isinstance(error, Unavailable) and "lock_timeout" in str(error), error
        assert took < 3.0
        assert quick.append_message(sid, {"role": "user", "content": "x"}).seq == 1  # the lock is gone
    finally:
        quick.db.close()


def test_statement_timeout_is_unavailable(settings) -> None:
    quick = build(replace(settings, statement_timeout=0.3, call_timeout=5.0))
    try:
        with pytest.raises(Unavailable, match="statement_timeout"), quick.db.transaction() as conn:
            conn.execute("SELECT pg_sleep(2)")
    finally:
        quick.db.close()


def _sync(env: dict[str, str], hook: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mcp_memory", "sync", "claude-code", "--hook", "--project", "h"],
                          env=env, input=hook, check=False, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - started


def test_hook_with_a_frozen_server_exits_in_time_and_spools(scratch_home, tmp_path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(claude_transcript())
    hook = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript), "session_id": "x"})
    pgdir = load_settings(environ=scratch_home).embedded_dir
    spool = Path(scratch_home["MCP_MEMORY_HOME"]) / "mcp-memory" / "spool"
    with frozen(pgdir):
        offline, took = _sync(scratch_home, hook)
    print(f"\nhook with a frozen embedded server exited after {took * 1000:.0f} ms")
    assert offline.returncode == 0 and took < 15, (took, offline.stderr[-500:])
    files = list(spool.glob("*.json"))
    assert len(files) == 1 and (files[0].stat().st_mode & 0o077) == 0
    back, _ = _sync(scratch_home, hook)
    assert back.returncode == 0, back.stderr
    assert not list(spool.glob("*.json"))
    service = build(load_settings(environ=scratch_home))
    try:
        sessions = service.list_sessions(project_id="h").sessions
        assert sessions and sum(s.last_seq for s in sessions) > 0
    finally:
        service.db.close()


def test_db_stop_then_an_attached_process_starts_the_server_again(scratch_home) -> None:
    settings = load_settings(environ=scratch_home)
    service = build(settings)
    try:
        sid = service.create_session("p").session_id
        before = embedded.status(settings.embedded_dir).pid
        stopped = subprocess.run([sys.executable, "-m", "mcp_memory", "db", "stop"], env=scratch_home,
                                 check=False, capture_output=True, text=True, timeout=60)
        assert stopped.returncode == 0 and "stopped" in stopped.stdout and "Traceback" not in stopped.stderr
        assert not embedded.status(settings.embedded_dir).running
        time.sleep(1.1)  # idle past the pool's check, as a host between two tool calls
        service.create_session("p")  # the next call after the stop starts it again, on the same data
        after = embedded.status(settings.embedded_dir).pid
        assert after is not None and after != before
        assert [s.session_id for s in service.list_sessions(project_id="p").sessions if s.session_id == sid]
    finally:
        service.db.close()


def test_doctor_warns_when_connections_run_low(settings, profile, admin_dsn) -> None:
    env = {**profile, "MCP_MEMORY_DSN": settings.dsn}

    def doctor() -> dict:
        done = subprocess.run([sys.executable, "-m", "mcp_memory", "doctor", "--json"], env=env,
                              check=False, capture_output=True, text=True, timeout=120)
        return {c["name"]: c for c in json.loads(done.stdout)["checks"]}

    quiet = doctor()["connections"]
    assert quiet["ok"] and "usable connection slots" in quiet["detail"]
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        max_connections = int(conn.execute("SHOW max_connections").fetchone()[0])
        reserved = int(conn.execute("SHOW superuser_reserved_connections").fetchone()[0])
        used = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'").fetchone()[0]
    extra = int(0.85 * (max_connections - reserved)) - used
    if extra > 150:
        pytest.skip(f"max_connections={max_connections}: too many connections to open for the warning")
    held = [psycopg.connect(settings.dsn, application_name="mm-filler") for _ in range(max(0, extra))]
    try:
        low = doctor()["connections"]
    finally:
        for conn in held:
            conn.close()
    assert low["ok"] and low["warning"] and "running low" in low["detail"] and "mm-filler" in low["detail"]
