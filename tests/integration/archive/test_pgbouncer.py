"""Behind a real PgBouncer (Debian's, in transaction mode, started per test and stopped by its PID):
an archiver whose DSN goes through the pooler refuses at once with a clear error and leaves the lease
to the real one; with `pgbouncer = true` and `direct_dsn`, it works (queue reads through the pooler,
lease and LISTEN direct). Skipped where PgBouncer is not installed."""

from __future__ import annotations

import configparser
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from archive_support import messages
from pgbouncer_support import running_pgbouncer
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from mcp_memory.archive.daemon import Archiver
from mcp_memory.archive.options import ArchiverOptions, AutoSnapshot
from mcp_memory.core.service import Service
from mcp_memory.errors import Invalid
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

pytest_plugins = ["security_support"]

@pytest.fixture
def pooled_dsn(settings) -> Iterator[str]:
    """A DSN through PgBouncer (transaction mode) to the test database, every client logged in to the
    server as the test DSN's user (auth_type = any)."""
    target = conninfo_to_dict(settings.dsn)
    databases = (f"{target['dbname']} = host={target['host']} port={target.get('port', 5432)} user={target['user']}"
                 # an external test server checks passwords: PgBouncer logs in to it with the test DSN's own
                 + (f" password={target['password']}" if target.get("password") else ""))
    with running_pgbouncer(target, databases, "auth_type = any\n") as (port, _):
        dsn = make_conninfo("", host="127.0.0.1", port=port, dbname=target["dbname"], user=target["user"])
        deadline = time.monotonic() + 15
        while True:
            try:
                psycopg.connect(dsn, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield dsn


def options(repo: Path) -> ArchiverOptions:
    return ArchiverOptions(repo=repo, auto=AutoSnapshot(enabled=False), lock_wait=2.0)


def test_an_archiver_through_pgbouncer_refuses_and_leaves_the_lease_to_the_real_one(
        service: Service, settings, pooled_dsn: str, tmp_path: Path) -> None:
    sid = service.create_session("proj").session_id
    service.append_messages(sid, messages(3))
    service.create_snapshot(sid, "one")
    started = time.monotonic()
    # pointed at the pooler as its database, or with a "direct" DSN that goes through it as well
    for wrong in (replace(settings, dsn=pooled_dsn), replace(settings, dsn=pooled_dsn, pgbouncer=True,
                                                             direct_dsn=pooled_dsn)):
        pooled = Database(replace(wrong, auto_migrate=False, pool_min=0, pool_max=2),
                          application_name="archiver@pgbouncer")
        try:
            with pytest.raises(Invalid, match="direct_dsn") as refused:
                Archiver(pooled, options(tmp_path / "wrong")).run(once=True)
        finally:
            pooled.close()
        assert "connection pooler" in str(refused.value)
    with psycopg.connect(settings.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM archive_leader").fetchone() == (0,)  # nothing held
    real = Archiver(service.db, options(tmp_path / "archive")).run(once=True)
    assert (real.done, real.failed) == (1, 0)
    assert time.monotonic() - started < 30  # the real one was not kept waiting for a lease


def test_with_direct_dsn_the_archiver_works_behind_pgbouncer(service: Service, settings, pooled_dsn: str,
                                                              tmp_path: Path) -> None:
    sid = service.create_session("proj").session_id
    service.append_messages(sid, messages(3))
    service.create_snapshot(sid, "one")
    db = Database(replace(settings, dsn=pooled_dsn, pgbouncer=True, direct_dsn=settings.dsn, auto_migrate=False,
                          pool_min=0, pool_max=2), application_name="archiver@pgbouncer")
    try:
        summary = Archiver(db, options(tmp_path / "archive")).run(once=True)
    finally:
        db.close()
    assert (summary.done, summary.failed) == (1, 0), summary.errors


def test_behind_pgbouncer_each_transaction_sets_its_timeouts(settings, pooled_dsn: str) -> None:
    db = Database(replace(settings, dsn=pooled_dsn, pgbouncer=True, statement_timeout=3.0, lock_timeout=2.0,
                          auto_migrate=False, pool_min=0, pool_max=2), application_name="host@pgbouncer")
    try:
        for _ in range(3):  # whatever server connection the pooler hands out
            with db.transaction() as conn:
                assert conn.execute("SHOW statement_timeout").fetchone() == ("3s",)
                assert conn.execute("SHOW lock_timeout").fetchone() == ("2s",)
        with psycopg.connect(pooled_dsn) as raw:  # a server connection the pool used: nothing stayed set
            assert raw.execute("SHOW statement_timeout").fetchone() == ("0",)
    finally:
        db.close()


def test_a_wait_behind_pgbouncer_without_direct_dsn_polls_instead_of_sleeping_out_its_timeout(
        service: Service, settings, pooled_dsn: str) -> None:
    sid = service.create_session("proj").session_id
    service.append_messages(sid, messages(1))
    host = build(replace(settings, dsn=pooled_dsn, pgbouncer=True, auto_migrate=False, pool_min=0, pool_max=2),
                 application_name="host@pgbouncer")
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            started = time.monotonic()
            waiting = pool.submit(host.read_session, sid, after_seq=1, wait_seconds=30)
            time.sleep(1.0)
            service.append_messages(sid, messages(1, "new"))
            page = waiting.result(timeout=40)
            elapsed = time.monotonic() - started
        assert [m.seq for m in page.messages] == [2]
        assert elapsed < 15, f"the wait took {elapsed:.1f}s of its 30"  # it polled (every 0.5 s)
        assert host.appends.listener.poll_seconds == 0.5
    finally:
        host.db.close()


GUIDE = Path(__file__).resolve().parents[3] / "install" / "pgbouncer"


def _guide_ini() -> configparser.RawConfigParser:
    ini = configparser.RawConfigParser(inline_comment_prefixes=None)
    ini.read_string((GUIDE / "pgbouncer.ini").read_text())
    return ini


@pytest.fixture
def auth_query_bouncer(settings, password_server: str) -> Iterator[tuple[int, str]]:
    """PgBouncer configured as install/pgbouncer/pgbouncer.ini says (auth_type scram-sha-256,
    auth_user, auth_query), the lookup installed from install/pgbouncer/auth_query.sql (its login
    renamed uniquely: roles are cluster-wide). Yields PgBouncer's port and the lookup login."""
    target = conninfo_to_dict(settings.dsn)
    lookup, secret = f"mmtest_pgb_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    script = (GUIDE / "auth_query.sql").read_text().replace("mcp_pgbouncer", lookup)
    with psycopg.connect(settings.dsn, autocommit=True) as conn:
        conn.execute(script)
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(lookup), sql.Literal(secret)))
    try:
        guide = _guide_ini()
        name = next(iter(guide["databases"]))
        # the guide forces the gateway login (the tier: tests/integration/security/test_gateway_tier.py);
        # here the per-role variant it also describes: the [databases] entry without user=
        assert "user=" in guide["databases"][name]
        wanted = {k: guide["pgbouncer"][k] for k in ("auth_type", "auth_user", "auth_query")}
        assert guide["pgbouncer"]["pool_mode"] == "transaction" and wanted["auth_type"] == "scram-sha-256"
        wanted["auth_user"] = wanted["auth_user"].replace("mcp_pgbouncer", lookup)
        databases = f"{target['dbname']} = host={target['host']} port={target.get('port', 5432)} dbname={target['dbname']}"
        with running_pgbouncer(target, databases, "".join(f"{k} = {v}\n" for k, v in wanted.items())
                               + "auth_file = {folder}/userlist.txt\n",
                               files={"userlist.txt": f'"{lookup}" "{secret}"\n'}) as (port, _):
            yield port, lookup
    finally:
        with psycopg.connect(settings.dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS pgbouncer CASCADE")
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (lookup,))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(lookup)))


def test_hosts_log_in_through_pgbouncer_as_their_own_roles_with_auth_query(
        service: Service, settings, auth_query_bouncer: tuple[int, str], make_token, owner_db: Database) -> None:
    port, lookup = auth_query_bouncer
    mine, theirs = service.create_session("A").session_id, service.create_session("B").session_id
    service.append_messages(theirs, messages(2))
    host = make_token("pgbhost", ["A"])
    dbname = conninfo_to_dict(settings.dsn)["dbname"]
    pooled = f"postgresql://{host.role}@127.0.0.1:{port}/{dbname}"
    with psycopg.connect(pooled, password=host.token, connect_timeout=10) as conn:  # SCRAM, checked by PgBouncer
        assert conn.execute("SELECT current_user").fetchone() == (host.role,)  # the server sees the host's role
        assert conn.execute("SELECT session_id FROM sessions").fetchall() == [(mine,)]  # row-level security
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(pooled, password=host.token[:-1] + "x", connect_timeout=10).close()
    # a host as the guide configures it: pgbouncer = true, its token, its own role on every write
    hosted = build(replace(settings, dsn=pooled, password=host.token, pgbouncer=True, auto_migrate=False,
                           pool_min=0, pool_max=2), application_name="host@pgbouncer")
    try:
        for _ in range(3):  # whatever server connection the pooler hands out
            hosted.append_messages(mine, messages(1, uuid.uuid4().hex))
    finally:
        hosted.db.close()
    with psycopg.connect(settings.dsn) as conn:
        assert conn.execute("SELECT DISTINCT written_by FROM messages WHERE session_id = %s",
                            (mine,)).fetchall() == [(host.role,)]
        superuser, owner_of_schema = conn.execute(
            "SELECT current_user, pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'sessions'::regclass").fetchone() \
            or ("", "")
        conn.execute("SET ROLE " + sql.Identifier(lookup).as_string(conn))  # what PgBouncer's lookup login may see
        found = {who: conn.execute("SELECT username, left(password, 14) FROM pgbouncer.user_lookup(%s)",
                                   (who,)).fetchone() for who in (host.role, superuser, owner_of_schema)}
        assert found[host.role] == (host.role, "SCRAM-SHA-256$")
        assert found[superuser] is None and found[owner_of_schema] is None  # no row: PgBouncer says "no such user"
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM sessions")  # it reads nothing else
