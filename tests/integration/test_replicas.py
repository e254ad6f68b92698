"""Read replicas (`[database] read_dsn`, store/replicas.py) on a real streaming standby: a PostgreSQL 15
primary and its hot standby made with pg_basebackup -R (scripts/ops/replica_pair.py), on free ports
in a temporary folder, stopped and removed at the end. Neither the CI cluster nor the embedded
server is touched.

Where a read ran is shown by what it sees: with the standby's replay paused, a row another process
wrote on the primary is missing from a read on the standby and present in a read on the primary."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from pg_servers_support import pg_bin, why_not

from mcp_memory.commands import doctor
from mcp_memory.config import Settings, load_settings
from mcp_memory.core.service import Service
from mcp_memory.errors import NotFound, Unavailable
from mcp_memory.security import tokens
from mcp_memory.store import migrate, replicas
from mcp_memory.store.roles import RoleDatabase
from mcp_memory.wiring import build

ROOT = Path(__file__).resolve().parents[2]
PG_BIN = pg_bin("MCP_MEMORY_REPLICA_PG_BIN")
PROJECT = "replicated"


def _why_not() -> str | None:
    return why_not(PG_BIN, ("initdb", "pg_ctl", "pg_basebackup", "postgres"))


pytestmark = [pytest.mark.skipif(_why_not() is not None, reason=_why_not() or ""), pytest.mark.own_servers]


@pytest.fixture(scope="module")
def pair() -> Iterator[object]:
    sys.path.insert(0, str(ROOT / "scripts" / "ops"))
    try:
        from replica_pair import ReplicaPair
    finally:
        sys.path.remove(str(ROOT / "scripts" / "ops"))
    started = ReplicaPair(PG_BIN).start()
    try:
        with psycopg.connect(started.dsn(started.primary), autocommit=True) as conn:
            conn.execute("CREATE DATABASE mm")
        migrate.migrate(started.dsn(started.primary, "mm"))
        started.wait_replayed()
        yield started
    finally:
        started.close()


def _settings(pair, profile: dict[str, str], *, max_replica_lag: float = 60.0) -> Settings:
    base = load_settings(dsn=pair.dsn(pair.primary, "mm"), environ=profile)
    return replace(base, read_dsns=(pair.dsn(pair.standby, "mm"),), max_replica_lag=max_replica_lag)


@pytest.fixture
def routed(pair, profile: dict[str, str]) -> Iterator[Service]:
    svc = build(_settings(pair, profile))
    try:
        yield svc
    finally:
        svc.db.close()


@pytest.fixture
def other(pair, profile: dict[str, str]) -> Iterator[Service]:
    """Another host on the same primary, without replicas: its writes are not `routed`'s own."""
    svc = build(load_settings(dsn=pair.dsn(pair.primary, "mm"), environ=profile))
    try:
        yield svc
    finally:
        svc.db.close()


class Replay:
    """Pause and resume the standby's replay (superuser functions on the standby)."""

    def __init__(self, pair) -> None:
        self.pair = pair

    def __enter__(self) -> Replay:
        with psycopg.connect(self.pair.dsn(self.pair.standby), autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_pause()")
        return self

    def __exit__(self, *exc: object) -> None:
        with psycopg.connect(self.pair.dsn(self.pair.standby), autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_resume()")
        self.pair.wait_replayed()


def _titles(svc: Service) -> set[str]:
    return {s.title or "" for s in svc.list_sessions(project_id=PROJECT, limit=200).sessions}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == replicas.__name__ and r.levelno >= logging.WARNING]


def _routes(caplog: pytest.LogCaptureFixture) -> list[str]:
    return ["replica" if "routed to replica" in r.getMessage() else "primary"
            for r in caplog.records if r.name == replicas.__name__ and "read routed" in r.getMessage()]


def test_reads_run_on_the_standby_and_own_writes_are_read_from_the_primary(
        pair, routed: Service, other: Service, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=replicas.__name__)
    mine = routed.create_session(PROJECT, {"title": "mine"})
    pair.wait_replayed()
    assert "mine" in _titles(routed)
    with Replay(pair):
        foreign = other.create_session(PROJECT, {"title": "foreign"})
        caplog.clear()
        assert "foreign" not in _titles(routed)  # the paused standby answered: it has not replayed it
        assert _routes(caplog) == ["replica"]
        caplog.clear()
        assert routed.get_session(foreign.session_id).title == "foreign"  # not found there: asked of the primary
        assert _routes(caplog) == ["primary"] and "not found there" in caplog.records[-1].getMessage()
        with psycopg.connect(pair.dsn(pair.standby, "mm"), autocommit=True) as conn:
            names = {row[0] for row in conn.execute(
                "SELECT application_name FROM pg_stat_activity WHERE datname = 'mm'").fetchall()}
        assert routed.db.application_name in names

        routed.append_message(mine.session_id, {"role": "user", "content": "written just now"})
        caplog.clear()
        page = routed.read_session(mine.session_id)  # read-your-writes: the standby cannot have it yet
        assert [m.content for m in page.messages] == ["written just now"]
        assert "foreign" in _titles(routed)  # the primary answers every read until the standby catches up
        assert _routes(caplog) == ["primary", "primary"]
        assert all("read-your-writes" in r.getMessage() for r in caplog.records if "read routed" in r.getMessage())
    caplog.clear()
    assert "foreign" in _titles(routed)
    assert routed.read_session(mine.session_id).messages[0].seq == 1
    assert _routes(caplog) == ["replica", "replica"]


def test_every_routed_read_runs_on_a_standby(pair, routed: Service, caplog: pytest.LogCaptureFixture) -> None:
    """No routed operation writes (a standby would refuse it): each one is answered by the standby."""
    session = routed.create_session(PROJECT, {"title": "reads"})
    routed.append_message(session.session_id, {"role": "user", "content": "the replica answers searches"})
    decision = routed.record_decision(session.session_id, "architecture", "reads go to standbys")
    routed.set_context(session.session_id, "k", {"v": 1})
    routed.reindex_search(PROJECT)
    pair.wait_replayed()
    caplog.set_level(logging.DEBUG, logger=replicas.__name__)
    caplog.clear()
    sid = session.session_id
    assert routed.get_session(sid).title == "reads"
    assert routed.read_session(sid).messages
    assert routed.list_snapshots(sid) == []
    assert routed.get_decision(decision.decision_id).summary == "reads go to standbys"
    assert routed.search_decisions("standbys", project_id=PROJECT).decisions
    assert routed.get_context(sid, "k").context == {"k": {"v": 1}}
    assert routed.search_messages("replica", project_id=PROJECT, mode="fts").matches
    assert routed.recall("replica", project_id=PROJECT).items
    assert routed.get_digest(PROJECT) is not None
    assert routed.query_memory("SELECT count(*) AS n FROM sessions").rows
    assert routed.list_synonyms() is not None
    assert routed.list_agents() is not None
    assert routed.recall_digest(project_id=PROJECT) is not None
    routes = _routes(caplog)
    assert routes and set(routes) == {"replica"}, [r.getMessage() for r in caplog.records]
    assert not _warnings(caplog)


def test_a_wait_tail_stays_on_the_primary(pair, routed: Service, other: Service) -> None:
    session = routed.create_session(PROJECT, {"title": "tail"})
    pair.wait_replayed()
    with Replay(pair):
        pages = []
        reader = threading.Thread(target=lambda: pages.append(
            routed.read_session(session.session_id, wait_seconds=10)))
        reader.start()
        time.sleep(0.5)
        other.append_message(session.session_id, {"role": "assistant", "content": "tailed"})
        reader.join(timeout=15)
        assert pages and [m.content for m in pages[0].messages] == ["tailed"]


def test_a_lagging_standby_is_skipped(pair, profile: dict[str, str], other: Service,
                                      caplog: pytest.LogCaptureFixture) -> None:
    svc = build(_settings(pair, profile, max_replica_lag=0.3))
    try:
        assert "lag" not in _titles(svc)
        with Replay(pair):
            other.create_session(PROJECT, {"title": "lag"})
            time.sleep(0.8)
            caplog.clear()
            assert "lag" in _titles(svc) and "lag" in _titles(svc)  # the primary answered
            warned = _warnings(caplog)
            assert len(warned) == 1 and "max_replica_lag 0.3 s" in warned[0], warned
    finally:
        svc.db.close()


def test_a_stopped_standby_falls_back_to_the_primary_and_comes_back(
        pair, routed: Service, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    routed.create_session(PROJECT, {"title": "before"})
    pair.wait_replayed()
    assert "before" in _titles(routed)
    pair.standby.stop()
    try:
        caplog.clear()
        routed.create_session(PROJECT, {"title": "while down"})
        started = time.monotonic()
        assert "while down" in _titles(routed) and "while down" in _titles(routed)
        assert time.monotonic() - started < 5
        warned = _warnings(caplog)
        assert len(warned) == 1 and "skipped" in warned[0] and "unreachable" in warned[0], warned
        assert doctor.run(routed.settings, type("Args", (), {"json": False})()) == 0  # a warning, not a failure
        assert "[warn] read replicas: " in (out := capsys.readouterr().out) and "is unreachable" in out, out
    finally:
        pair.standby.start()
    pair.wait_streaming()
    pair.wait_replayed()
    time.sleep(replicas.RETRY_SECONDS)
    caplog.set_level(logging.DEBUG, logger=replicas.__name__)
    caplog.clear()
    assert "while down" in _titles(routed)
    assert _routes(caplog) == ["replica"]
    assert any("serves reads again" in r.getMessage() for r in caplog.records)


def test_a_standby_given_as_the_dsn_is_refused(pair, profile: dict[str, str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    settings = replace(load_settings(dsn=pair.dsn(pair.standby, "mm"), environ=profile), dsn_source="config")
    svc = build(settings)
    try:
        for attempt in (lambda: svc.read_session("ses_00000000-0000-0000-0000-000000000000", wait_seconds=1),
                        lambda: svc.create_session(PROJECT), lambda: svc.list_sessions(project_id=PROJECT)):
            with pytest.raises(Unavailable) as refused:
                attempt()
            message = str(refused.value)
            assert message.startswith("[database] dsn points at a read-only standby (pg_is_in_recovery() is true)")
            assert "[database] read_dsn" in message
    finally:
        svc.db.close()
    args = type("Args", (), {"json": False})()
    assert doctor.run(replace(settings, read_dsns=(pair.dsn(pair.standby, "mm"),)), args) == 1
    out = capsys.readouterr().out
    assert "[FAIL] database: [database] dsn points at a read-only standby" in out and "check the DSN" not in out
    assert "[ok] read replicas: " in out and "standby, replay lag" in out


def test_token_hosts_and_rest_roles_read_their_own_projects_on_the_standby(
        pair, profile: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    """A host holding a token reads on the standby as its role (row-level security holds there) and
    reads its own appends back at once; a REST role (RoleDatabase on the server's login) likewise."""
    owner_settings = _settings(pair, profile)
    owner = build(owner_settings)
    try:
        created = tokens.create(owner.db, name="replica-host", projects=[PROJECT])
        theirs = owner.create_session("elsewhere", {"title": "not for the token"})
        host = build(replace(owner_settings, dsn=created.dsn, password=created.token, auto_migrate=False,
                             read_dsns=(tokens.role_dsn(pair.dsn(pair.standby, "mm"), created.role),)))
        rest = Service(RoleDatabase(owner.db, created.role, created.token))
        try:
            mine = host.create_session(PROJECT, {"title": "token host"})
            pair.wait_replayed()
            caplog.set_level(logging.DEBUG, logger=replicas.__name__)
            caplog.clear()
            for svc in (host, rest):
                assert "token host" in _titles(svc)
                assert svc.list_sessions(project_id="elsewhere").sessions == []
                with pytest.raises(NotFound):
                    svc.get_session(theirs.session_id)  # not on the standby, nor on the primary
            assert _routes(caplog) == ["replica", "replica", "primary"] * 2  # the last: "not found" asked again
            with Replay(pair):
                host.append_message(mine.session_id, {"role": "user", "content": "as the token"})
                caplog.clear()
                assert [m.content for m in host.read_session(mine.session_id).messages] == ["as the token"]
                assert _routes(caplog) == ["primary"]
        finally:
            rest.db.close()
            host.db.close()
    finally:
        owner.db.close()
