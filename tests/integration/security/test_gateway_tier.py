"""The connection tier (install/pgbouncer/README.md): every host logs in to a real PgBouncer (transaction
mode) with its OWN token role and token (auth_query), PgBouncer logs in to PostgreSQL as ONE forced
gateway login, and each host transaction proves its token (mm_enter, migration 0020) before its role
counts. Attacked here with raw SQL through the pooler by the holder of token A: B's role without a
proof, or with A's, or with a proof replayed from an earlier transaction, reads nothing of B and
writes nothing; an expired or revoked token gets no proof. The host path (append, search, read, live
tail over direct_dsn) works end to end. Skipped where PgBouncer is not installed."""

from __future__ import annotations

import configparser
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import psycopg
import pytest
from pgbouncer_support import running_pgbouncer
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from security_support import token_service

from mcp_memory.archive.daemon import Archiver
from mcp_memory.archive.options import ArchiverOptions, AutoSnapshot
from mcp_memory.config import Settings
from mcp_memory.errors import Unauthorized
from mcp_memory.security import tokens
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

pytest_plugins = ["security_support"]

INSTALL = Path(__file__).resolve().parents[3] / "install" / "pgbouncer"
# what the shipped ini sets for the tier (its addresses, ports and sizes are the operator's)
TIER_KEYS = ("pool_mode", "auth_type", "auth_query", "server_reset_query", "server_reset_query_always")
REFUSED = {"MM403", "MM404", "42501"}  # [forbidden], or [not_found] for a session the caller cannot see


@dataclass
class Tier:
    port: int
    dbname: str
    gateway: str
    direct: str  # the test database, reached directly

    def dsn(self, token: tokens.CreatedToken) -> str:
        return make_conninfo("", host="127.0.0.1", port=self.port, dbname=self.dbname, user=token.role)

    def connect(self, token: tokens.CreatedToken, **kwargs: object) -> psycopg.Connection:
        return psycopg.connect(self.dsn(token), password=token.token, prepare_threshold=None, connect_timeout=5,
                               **kwargs)


def shipped_settings() -> str:
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(INSTALL / "pgbouncer.ini")
    section = ini["pgbouncer"]
    assert section["server_reset_query_always"] == "1", "a session SET must not outlive its transaction"
    return "".join(f"{key} = {section[key]}\n" for key in TIER_KEYS)


def lookup_sql(lookup: str) -> str:
    return (INSTALL / "auth_query.sql").read_text().replace("mcp_pgbouncer", lookup)


@pytest.fixture
def tier(settings: Settings, owner_db: Database, admin_dsn: str,
         make_token: Callable[..., tokens.CreatedToken]) -> Iterator[Tier]:
    target = conninfo_to_dict(settings.dsn)
    suffix = uuid.uuid4().hex[:8]
    gateway = tokens.create_gateway(owner_db, name=f"mmtest_gw_{suffix}")
    lookup, lookup_password = f"mmtest_pgb_{suffix}", uuid.uuid4().hex
    as_admin = make_conninfo(admin_dsn, dbname=target["dbname"])
    with psycopg.connect(as_admin, autocommit=True) as conn:
        conn.execute(lookup_sql(lookup))
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(lookup), sql.Literal(lookup_password)))
    databases = (f"{target['dbname']} = host={target['host']} port={target.get('port', 5432)} "
                 f"dbname={target['dbname']} user={gateway.role}")
    lines = (shipped_settings() + "auth_file = {folder}/userlist.txt\n" + f"auth_user = {lookup}\n"
             + "max_client_conn = 200\ndefault_pool_size = 3\n")
    users = f'"{gateway.role}" "{gateway.password}"\n"{lookup}" "{lookup_password}"\n'
    try:
        with running_pgbouncer(target, databases, lines, files={"userlist.txt": users}) as (port, _):
            yield Tier(port=port, dbname=target["dbname"], gateway=gateway.role, direct=settings.dsn or "")
    finally:
        with psycopg.connect(as_admin, autocommit=True) as conn:
            for role in (gateway.role, lookup):
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def seeded(settings: Settings, token: tokens.CreatedToken, project: str) -> dict[str, object]:
    """A session of `project` with messages, a snapshot, a context value and a private decision,
    written by the token's own host (a direct login)."""
    svc = token_service(settings, token)
    try:
        sid = svc.create_session(project, {"title": f"{project} secrets"}).session_id
        svc.append_messages(sid, [{"role": "user", "content": f"{project} zebrafish plan {i}",
                                   "append_id": f"msg_{uuid.uuid4().hex}"} for i in range(3)])
        snap = svc.create_snapshot(sid, "one").snapshot_id
        svc.set_context(sid, "k", {"v": 1})
        decision = svc.record_decision(sid, "design", f"{project} private call", visibility="private").decision_id
    finally:
        svc.db.close()
    return {"sid": sid, "snap": snap, "decision": decision}


def visible(conn: psycopg.Connection, project: str) -> dict[str, int]:
    counts = {table: conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE project_id = %s").format(
        sql.Identifier(table)), (project,)).fetchone()[0]
        for table in ("sessions", "messages", "snapshots", "session_context", "decisions")}
    counts["access_tokens"] = conn.execute("SELECT count(*) FROM access_tokens").fetchone()[0]
    counts["access_token_projects"] = conn.execute("SELECT count(*) FROM access_token_projects").fetchone()[0]
    return counts


def writes(b: dict[str, object]) -> list[tuple[str, tuple[object, ...]]]:
    """Every write function of the API, aimed at B's project and rows."""
    sid, snap, decision = b["sid"], b["snap"], b["decision"]
    return [
        ("SELECT mm_create_session(%s, 'PB', 'claude-code', 't', '{}'::jsonb)", (f"ses_{uuid.uuid4()}",)),
        ("SELECT mm_append(%s, ARRAY['msg_x'], ARRAY['user'], ARRAY['{}'], ARRAY[sha256('x')], ARRAY[now()])", (sid,)),
        ("SELECT mm_snapshot(%s, 'x', '{}'::jsonb)", (sid,)),
        ("SELECT mm_set_context(%s, 'k', '2'::jsonb)", (sid,)),
        ("SELECT mm_update_session_meta(%s, '{\"a\": 1}'::jsonb, '{}', false, NULL, false, NULL)", (sid,)),
        ("SELECT mm_fork(%s, %s, 'claude-code', 't', '{}'::jsonb)", (snap, f"ses_{uuid.uuid4()}")),
        ("SELECT mm_record_decision(%s, %s, NULL, 'design', 's', 'accepted', NULL, '[]'::jsonb, NULL, '{}'::jsonb, "
         "'team', NULL)", (sid, f"dec_{uuid.uuid4().hex}")),
        ("SELECT mm_update_decision(%s, 1, 'rejected', NULL, NULL, NULL, NULL, NULL)", (decision,)),
        ("SELECT mm_record_relay(%s, 'codex', 'x', ARRAY['msg_x'])", (sid,)),
    ]


def owner_view(settings: Settings, project: str) -> tuple[object, ...]:
    with psycopg.connect(settings.dsn or "") as conn:
        return tuple(conn.execute(sql.SQL("SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "
                                          "FROM {} t WHERE project_id = %s").format(sql.Identifier(table)),
                                  (project,)).fetchone()
                     for table in ("sessions", "messages", "snapshots", "session_context", "decisions",
                                   "relay_exports", "export_jobs"))


@pytest.mark.parametrize("proof", ["none", "foreign", "session-level"])
def test_another_tokens_role_reads_nothing_and_writes_nothing_without_its_proof(
        tier: Tier, settings: Settings, make_token: Callable[..., tokens.CreatedToken], proof: str) -> None:
    a, b = make_token("pa", ["PA"]), make_token("pb", ["PB"])
    seeded(settings, a, "PA")
    mine = seeded(settings, b, "PB")
    before = owner_view(settings, "PB")

    def become_b(conn: psycopg.Connection) -> None:
        if proof == "foreign":
            assert conn.execute("SELECT mm_enter(%s)", (a.token,)).fetchone() == (a.role,)
        conn.execute(sql.SQL("SET LOCAL ROLE {}" if proof != "session-level" else "SET ROLE {}")
                     .format(sql.Identifier(b.role)))

    with tier.connect(a) as conn:
        become_b(conn)
        assert conn.execute("SELECT current_user, mm_caller()").fetchone() == (b.role, tier.gateway)
        assert visible(conn, "PB") == dict.fromkeys(
            ("sessions", "messages", "snapshots", "session_context", "decisions", "access_tokens",
             "access_token_projects"), 0)
        conn.rollback()
        for statement, params in writes(mine):
            become_b(conn)
            with pytest.raises(psycopg.Error) as refused:
                conn.execute(statement, params)
            assert refused.value.sqlstate in REFUSED, (statement, refused.value)
            conn.rollback()
        become_b(conn)  # the search indexer's claim answers "not yours" instead of raising
        assert conn.execute("SELECT mm_index_claim(%s)", (mine["sid"],)).fetchone() == (False,)
        conn.rollback()
    assert owner_view(settings, "PB") == before  # nothing of B changed


def test_with_its_own_proof_a_token_works_and_sees_only_its_own(
        tier: Tier, settings: Settings, make_token: Callable[..., tokens.CreatedToken]) -> None:
    a, b = make_token("pa", ["PA"]), make_token("pb", ["PB"])
    seeded(settings, a, "PA")
    seeded(settings, b, "PB")
    with tier.connect(a) as conn:
        assert conn.execute("SELECT mm_enter(%s)", (a.token,)).fetchone() == (a.role,)
        assert conn.execute("SELECT session_user, current_user, mm_caller()").fetchone() == (
            tier.gateway, a.role, a.role)
        assert visible(conn, "PA")["messages"] == 3 and visible(conn, "PA")["decisions"] == 1
        assert visible(conn, "PB")["messages"] == 0


def test_a_proof_replayed_in_a_later_transaction_or_another_backend_fails(
        tier: Tier, settings: Settings, make_token: Callable[..., tokens.CreatedToken]) -> None:
    a = make_token("pa", ["PA"])
    seeded(settings, a, "PA")
    with tier.connect(a) as conn, tier.connect(a) as other:
        conn.execute("SELECT mm_enter(%s)", (a.token,))
        proof, pid = conn.execute("SELECT current_setting('mm.gateway_proof'), pg_backend_pid()").fetchone()
        assert visible(conn, "PA")["messages"] == 3
        conn.commit()
        for victim in (conn, other):  # a later transaction (of this backend or another one)
            victim.execute("SELECT set_config('mm.gateway_proof', %s, true)", (proof,))
            victim.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(a.role)))
            assert victim.execute("SELECT mm_caller()").fetchone() == (tier.gateway,)
            assert visible(victim, "PA")["messages"] == 0
            victim.rollback()
        assert pid  # (the same pid may serve both: the transaction start time differs)


def test_an_expired_or_revoked_token_gets_no_proof(
        tier: Tier, settings: Settings, admin_dsn: str, owner_db: Database,
        make_token: Callable[..., tokens.CreatedToken]) -> None:
    a, expired, revoked = make_token("pa", ["PA"]), make_token("px", ["PA"]), make_token("pr", ["PA"])
    with psycopg.connect(make_conninfo(admin_dsn, dbname=tier.dbname), autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} VALID UNTIL '2000-01-01'").format(sql.Identifier(expired.role)))
    tokens.revoke(owner_db, revoked.role)
    with tier.connect(a) as conn:
        for token in (expired.token, revoked.token, "mmt.nobody.notasecret"):
            with pytest.raises(psycopg.Error) as refused:
                conn.execute("SELECT mm_enter(%s)", (token,))
            assert refused.value.sqlstate == "MM403"
            conn.rollback()
    # and a host configured with such a token is told [forbidden] (PgBouncer itself refuses the login)
    host = build(replace(settings, dsn=tier.dsn(expired), password=expired.token, pgbouncer=True, gateway=True,
                         auto_migrate=False, pool_min=0, pool_max=1), application_name="expired@tier")
    try:
        with pytest.raises(Unauthorized):  # [forbidden], never [unavailable]
            host.create_session("PA")
    finally:
        host.db.close()


def test_the_host_path_works_end_to_end_through_the_forced_gateway(
        tier: Tier, settings: Settings, admin_dsn: str, make_token: Callable[..., tokens.CreatedToken]) -> None:
    a = make_token("pa", ["PA"])
    direct = tokens.role_dsn(tier.direct, a.role)
    host = build(replace(settings, dsn=tier.dsn(a), password=a.token, pgbouncer=True, gateway=True, direct_dsn=direct,
                         auto_migrate=False, pool_min=0, pool_max=2), application_name="host@tier")
    try:
        sid = host.create_session("PA", {"title": "tier"}).session_id
        assert host.append_messages(sid, [{"role": "user", "content": f"quokka migration step {i}",
                                           "append_id": f"msg_{uuid.uuid4().hex}"} for i in range(3)]).seqs == [1, 2, 3]
        matches = host.search_messages("quokka", project_id="PA").matches
        assert {m.session_id for m in matches} == {sid}
        assert [m.seq for m in host.read_session(sid).messages] == [1, 2, 3]
        # live tail: LISTEN goes direct, the wait wakes on an append made through the pooler
        later = threading.Timer(0.5, lambda: host.append_message(sid, {"role": "assistant", "content": "woke",
                                                                      "append_id": f"msg_{uuid.uuid4().hex}"}))
        started = time.monotonic()
        later.start()
        woke = host.read_session(sid, after_seq=3, wait_seconds=10)
        later.join()
        assert [m.seq for m in woke.messages] == [4] and time.monotonic() - started < 5
        with psycopg.connect(make_conninfo(admin_dsn, dbname=tier.dbname)) as conn:
            logins = dict(conn.execute(
                "SELECT usename, count(*) FROM pg_stat_activity WHERE datname = %s GROUP BY usename",
                (tier.dbname,)).fetchall())
        # the pooled work ran on the gateway's server connections; the host's own login holds only
        # its LISTEN connection (direct_dsn)
        assert logins.get(tier.gateway, 0) >= 1 and logins.get(a.role, 0) <= 1, logins
    finally:
        host.db.close()


def test_the_archiver_works_through_the_tier_with_direct_dsn(
        tier: Tier, settings: Settings, make_token: Callable[..., tokens.CreatedToken], tmp_path: Path) -> None:
    a = make_token("pa", ["PA"])
    sid = seeded(settings, a, "PA")["sid"]
    archiver = make_token("arc", None, archiver=True)
    db = Database(replace(settings, dsn=tier.dsn(archiver), password=archiver.token, pgbouncer=True, gateway=True,
                          direct_dsn=tokens.role_dsn(tier.direct, archiver.role), auto_migrate=False,
                          pool_min=0, pool_max=2), application_name="archiver@tier")
    try:
        summary = Archiver(db, ArchiverOptions(repo=tmp_path / "archive", auto=AutoSnapshot(enabled=False),
                                               lock_wait=2.0)).run(once=True)
    finally:
        db.close()
    assert (summary.done, summary.failed) == (1, 0), summary.errors
    assert (tmp_path / "archive" / "sessions" / f"{sid}.jsonl").read_text().count("\n") == 3
