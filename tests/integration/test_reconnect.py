"""The core reconnects by itself when its server goes away and comes back (a crash, a restart, a
failover to another host): a running Service keeps appending (the pool is rebuilt), a reader
waiting in read_session(wait_seconds) is woken by appends after the restart (the append listener
LISTENs again), a running archiver daemon exports snapshots made after it (lease and LISTEN
connections reopened), and an append whose commit outcome the client never learned, retried with
its append_id, is answered duplicate=true — never a conflict.

A throwaway PostgreSQL 15 server of the test's own (initdb into a temporary folder, own port,
stopped through pg_ctl), because the shared test server must not be restarted under other tests."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
from archive_support import archive_lines
from pg_servers_support import pg_bin, why_not

from mcp_memory.archive.daemon import Archiver
from mcp_memory.archive.options import ArchiverOptions, AutoSnapshot
from mcp_memory.config import load_settings
from mcp_memory.core.service import Service
from mcp_memory.errors import Unavailable
from mcp_memory.store import migrate
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "ops"))
from pgcluster import Cluster, Tools, free_port

PG_BIN = pg_bin("MCP_MEMORY_DRILL_PG_BIN")
SUPERUSER, PASSWORD = "reconnect_admin", "reconnect-secret"


def _cannot_run() -> str | None:
    return why_not(PG_BIN)


pytestmark = [pytest.mark.skipif(_cannot_run() is not None, reason=_cannot_run() or ""), pytest.mark.own_servers]


@pytest.fixture
def server() -> Iterator[Cluster]:
    """A migrated database on a server of this test's own, restarted at will."""
    work = Path(tempfile.mkdtemp(prefix="mm-reconnect-"))  # the server user enters it: not pytest's 0700 tmp
    work.chmod(0o755)
    tools = Tools(PG_BIN)
    sockets = tools.folder(work / "sockets", 0o755)
    log = work / "server.log"
    log.touch()
    os.chown(log, tools.owner.pw_uid, tools.owner.pw_gid)
    cluster = Cluster(tools, work / "data", port=free_port(), sockets=sockets, log=log)
    try:
        cluster.initdb(SUPERUSER, PASSWORD, work / "pwfile")
        cluster.configure({"port": str(cluster.port), "listen_addresses": "'127.0.0.1'",
                           "unix_socket_directories": f"'{sockets}'", "fsync": "off", "shared_buffers": "'32MB'",
                           "max_connections": "40"})
        cluster.start()
        with psycopg.connect(cluster.dsn(SUPERUSER, PASSWORD), autocommit=True) as conn:
            conn.execute("CREATE DATABASE mcp_memory")
        migrate.migrate(cluster.dsn(SUPERUSER, PASSWORD, "mcp_memory"))
        yield cluster
    finally:
        cluster.stop("immediate")
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def service(server: Cluster, tmp_path: Path) -> Iterator[Service]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")}
    environ["MCP_MEMORY_HOME"] = str(tmp_path / "home")
    settings = replace(load_settings(dsn=server.dsn(SUPERUSER, PASSWORD, "mcp_memory"), environ=environ),
                       pool_min=2, pool_max=4, connect_timeout=3.0)
    svc = build(settings)
    try:
        yield svc
    finally:
        svc.db.close()


def restart(server: Cluster, down: float = 3.0) -> None:
    """A crash (immediate stop: no goodbye to the clients), `down` seconds without a server (as
    while a standby is promoted), and the server back on the same port."""
    server.stop("immediate")
    time.sleep(down)
    server.start()


def eventually(call: Callable[[], Any], seconds: float = 30.0) -> Any:
    """`call` retried on Unavailable (the one failure a caller sees while a connection is replaced)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except Unavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_appends_and_a_waiting_reader_carry_on_across_a_restart(server: Cluster, service: Service) -> None:
    sid = service.create_session("proj").session_id
    service.append_message(sid, {"role": "user", "content": "before", "append_id": "a-0"})
    pages: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def tail() -> None:
        """A live tail: read_session(wait_seconds) in a loop, reading on after every failure."""
        after = 1
        while not stop.is_set():
            try:
                page = service.read_session(sid, after_seq=after, wait_seconds=5)
            except Unavailable:
                time.sleep(0.2)
                continue
            except BaseException as exc:  # noqa: BLE001 - reported by the test below
                errors.append(exc)
                return
            for message in page.messages:
                pages.append(message.seq)
                after = message.seq

    reader = threading.Thread(target=tail, name="tail")
    reader.start()
    try:
        time.sleep(1.0)  # the reader is waiting on LISTEN
        restart(server)
        result = eventually(lambda: service.append_message(sid, {"role": "user", "content": "after", "append_id": "a-1"}))
        assert (result.seq, result.duplicate) == (2, False)
        deadline = time.monotonic() + 15
        while 2 not in pages and time.monotonic() < deadline:
            time.sleep(0.1)
        assert 2 in pages, "the waiting reader never saw the append made after the restart"
        # the listener is live again: an append now wakes the reader well within its wait
        service.append_message(sid, {"role": "user", "content": "later", "append_id": "a-2"})
        woke_by = time.monotonic() + 3
        while 3 not in pages and time.monotonic() < woke_by:
            time.sleep(0.05)
        assert 3 in pages
        assert service.appends.listener.connected() == 1
    finally:
        stop.set()
        reader.join(timeout=15)
    assert not errors and not reader.is_alive()


def test_a_retried_append_whose_commit_was_not_acknowledged_is_a_duplicate(server: Cluster, service: Service) -> None:
    """The commit reached the server, the answer did not: the retry with the same append_id must
    say duplicate=true with the first seq (what a host retries after a failover)."""
    sid = service.create_session("proj").session_id
    message = {"role": "assistant", "content": "committed, answer lost", "append_id": "lost-answer"}
    service.append_message(sid, message)  # the commit whose acknowledgement the client "lost"
    restart(server)
    again = eventually(lambda: service.append_message(sid, message))
    assert (again.seq, again.duplicate) == (1, True)
    batch = [message, {"role": "user", "content": "new", "append_id": "next"}]
    both = eventually(lambda: service.append_messages(sid, batch))
    assert both.seqs == [1, 2] and both.duplicates == [True, False]


def test_an_append_cut_off_while_its_commit_waits_is_a_duplicate_on_retry(server: Cluster, service: Service) -> None:
    """The commit outcome unknown, as when a primary dies while it waits for its standby: the server
    waits for a synchronous standby that does not exist, the call's deadline cuts the client off
    ([unavailable]), the commit completes once the wait is lifted; the retry with the same
    append_id is answered duplicate=true at the first seq, and the session holds one row."""
    sid = service.create_session("proj").session_id
    admin = server.dsn(SUPERUSER, PASSWORD, "mcp_memory")

    def standby_wait(names: str) -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
            conn.execute("SELECT pg_reload_conf()")
        time.sleep(0.5)

    impatient = build(replace(service.settings, call_timeout=1.5, statement_timeout=60.0, pool_min=0))
    message = {"role": "user", "content": "outcome unknown", "append_id": "unknown-outcome"}
    try:
        standby_wait("nobody")
        with pytest.raises(Unavailable, match=r"no answer within 1\.5 s"):
            impatient.append_message(sid, message)
        standby_wait("")
        again = eventually(lambda: impatient.append_message(sid, message))
    finally:
        standby_wait("")
        impatient.db.close()
    assert (again.seq, again.duplicate) == (1, True)
    with psycopg.connect(admin) as conn:
        rows = conn.execute("SELECT seq, append_id FROM messages WHERE session_id = %s", (sid,)).fetchall()
    assert rows == [(1, "unknown-outcome")]


def test_the_archiver_daemon_carries_on_across_a_restart(server: Cluster, service: Service, tmp_path: Path) -> None:
    db = Database(replace(service.settings, pool_min=0, pool_max=2), application_name="archiver@reconnect")
    options = ArchiverOptions(repo=tmp_path / "archive", poll_interval=1.0, standby_interval=0.5,
                              auto=AutoSnapshot(enabled=False))
    archiver = Archiver(db, options)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            archiver.run(once=False)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failure.append(exc)

    daemon = threading.Thread(target=run, name="archiver")
    sid = service.create_session("proj").session_id
    try:
        daemon.start()
        service.append_message(sid, {"role": "user", "content": "one", "append_id": "one"})
        service.create_snapshot(sid, "first")
        wait_for(partial(archived, options.repo, sid, 1), "the first snapshot in git")
        for round_ in range(2):
            restart(server)
            message = {"role": "user", "content": f"after restart {round_}", "append_id": f"r{round_}"}
            eventually(partial(service.append_message, sid, message))
            eventually(partial(service.create_snapshot, sid, "after a restart"))
            wait_for(partial(archived, options.repo, sid, round_ + 2),
                     f"the snapshot made after restart {round_ + 1} in git")
        assert daemon.is_alive() and not failure
    finally:
        archiver.stop()
        daemon.join(timeout=30)
        db.close()
    assert not daemon.is_alive() and not failure, failure


def archived(repo: Path, session_id: str, lines: int) -> bool:
    return len(archive_lines(repo, session_id)) == lines


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 40.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    pytest.fail(f"not within {seconds:g} s: {what}")
