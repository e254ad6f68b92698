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
from datetime import timedelta
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


def attackers(make_token: Callable[..., tokens.CreatedToken]) -> dict[str, tokens.CreatedToken]:
    """A read-write and a read-only token of project PA, and the archiver: what a token may become."""
    return {"rw": make_token("pa", ["PA"]), "ro": make_token("pq", ["PA"], read_only=True),
            "archiver": make_token("arc", None, archiver=True)}


def role_state(admin: psycopg.Connection, role: str) -> tuple[object, ...]:
    """What a role may change of itself: its password, its defaults, its login and expiry."""
    return admin.execute(
        "SELECT a.rolpassword, a.rolcanlogin, a.rolvaliduntil, a.rolconnlimit, "
        "       (SELECT array_agg(s.setconfig::text ORDER BY s.setdatabase) FROM pg_db_role_setting s "
        "        WHERE s.setrole = a.oid) FROM pg_authid a WHERE a.rolname = %s", (role,)).fetchone()


@pytest.mark.parametrize("kind", ["rw", "ro"])
def test_no_token_role_can_be_taken_or_altered_through_the_tier(
        tier: Tier, settings: Settings, admin_dsn: str, make_token: Callable[..., tokens.CreatedToken],
        kind: str) -> None:
    """The gateway is a member of no token role: whatever a token sends, no other token's role is
    reachable, and nothing a role may do to itself can be done to another's."""
    tokens_ = attackers(make_token)
    a, b = tokens_[kind], make_token("pb", ["PB"])
    victims = (b.role, tokens_["archiver"].role)
    seeded(settings, b, "PB")
    as_admin = make_conninfo(admin_dsn, dbname=tier.dbname)
    with psycopg.connect(as_admin, autocommit=True) as admin:
        before = {role: role_state(admin, role) for role in victims}
    attacks = [sql.SQL(text).format(victim=sql.Identifier(victim)) for victim in victims for text in (
        "SET ROLE {victim}", "SET LOCAL ROLE {victim}", "SET SESSION AUTHORIZATION {victim}",
        "ALTER ROLE {victim} PASSWORD 'taken'", "ALTER ROLE {victim} SET search_path = pg_temp",
        "ALTER ROLE {victim} IN DATABASE postgres SET statement_timeout = '1ms'", "ALTER ROLE {victim} VALID UNTIL 'infinity'",
        "ALTER ROLE {victim} CONNECTION LIMIT 0", "GRANT {victim} TO CURRENT_USER", "DROP ROLE {victim}")]
    with tier.connect(a) as conn:
        for proven in (False, True):
            for attack in attacks:
                if proven:
                    assert conn.execute("SELECT mm_enter(%s)", (a.token,)).fetchone() == (a.role,)
                with pytest.raises(psycopg.Error) as refused:
                    conn.execute(attack)
                assert refused.value.sqlstate == "42501", (attack.as_string(conn), refused.value)
                conn.rollback()
        # RESET ROLE / SET ROLE NONE: the gateway itself, which is nobody without a proof
        for reset in ("RESET ROLE", "SET ROLE NONE"):
            conn.execute(reset)
            assert conn.execute("SELECT current_user, mm_caller()").fetchone() == (tier.gateway, tier.gateway)
            assert visible(conn, "PB") == dict.fromkeys(
                ("sessions", "messages", "snapshots", "session_context", "decisions", "access_tokens",
                 "access_token_projects"), 0)
            conn.rollback()
    with psycopg.connect(as_admin, autocommit=True) as admin:
        assert {role: role_state(admin, role) for role in victims} == before


@pytest.mark.parametrize("persona", ["none", "mcp_memory_rw", "mcp_memory_ro", "mcp_memory_archiver",
                                     "mcp_memory_gateway"])
def test_the_roles_a_gateway_may_take_read_nothing_and_write_nothing_of_another_token(
        tier: Tier, settings: Settings, make_token: Callable[..., tokens.CreatedToken], persona: str) -> None:
    """The group roles a gateway is (or inherits from) may be taken with SET ROLE; with A's proof or
    without one, they read nothing of B and every write function refuses B's rows."""
    a, b = make_token("pq", ["PA"], read_only=True), make_token("pb", ["PB"])
    mine = seeded(settings, b, "PB")
    before = owner_view(settings, "PB")

    def become(conn: psycopg.Connection, proven: bool) -> None:
        if proven:
            assert conn.execute("SELECT mm_enter(%s)", (a.token,)).fetchone() == (a.role,)
        if persona != "none":
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(persona)))

    with tier.connect(a) as conn:
        for proven in (False, True):
            become(conn, proven)
            own_rows = int(proven and persona == "none")  # A's own token row and scope row, nothing of B
            assert visible(conn, "PB") == {"sessions": 0, "messages": 0, "snapshots": 0, "session_context": 0,
                                           "decisions": 0, "access_tokens": own_rows, "access_token_projects": own_rows}
            conn.rollback()
            for statement, params in writes(mine):
                become(conn, proven)
                with pytest.raises(psycopg.Error) as refused:
                    conn.execute(statement, params)
                assert refused.value.sqlstate in REFUSED, (statement, refused.value)
                conn.rollback()
            become(conn, proven)  # the search indexer's claim answers "not yours" (or is not granted)
            if persona in ("mcp_memory_ro", "mcp_memory_archiver"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute("SELECT mm_index_claim(%s)", (mine["sid"],))
            else:
                assert conn.execute("SELECT mm_index_claim(%s)", (mine["sid"],)).fetchone() == (False,)
            conn.rollback()
    assert owner_view(settings, "PB") == before  # nothing of B changed


def test_other_backends_can_be_neither_watched_nor_ended_through_the_tier(
        tier: Tier, settings: Settings, make_token: Callable[..., tokens.CreatedToken]) -> None:
    """B's direct connection (a live tail, an archiver lease) and the other pooled backends of the
    gateway: their queries are not shown and they cannot be cancelled or ended."""
    a, b = make_token("pa", ["PA"]), make_token("pb", ["PB"])
    with psycopg.connect(tokens.role_dsn(tier.direct, b.role), password=b.token, autocommit=True) as victim, \
            tier.connect(b) as pooled_victim, tier.connect(a) as conn:
        victim_pid = victim.execute("SELECT pg_backend_pid()").fetchone()[0]
        pooled_victim.execute("SELECT mm_enter(%s)", (b.token,))
        pooled_pid = pooled_victim.execute("SELECT pg_backend_pid()").fetchone()[0]  # held: its transaction is open
        for statement in ("SELECT query FROM pg_stat_activity", "SELECT * FROM pg_stat_get_activity(NULL)",
                          "SELECT pg_stat_get_backend_activity(s) FROM pg_stat_get_backend_idset() s",
                          f"SELECT pg_terminate_backend({victim_pid})", f"SELECT pg_cancel_backend({victim_pid})",
                          f"SELECT pg_terminate_backend({pooled_pid})", f"SELECT pg_cancel_backend({pooled_pid})"):
            for proven in (False, True):
                if proven:
                    conn.execute("SELECT mm_enter(%s)", (a.token,))
                with pytest.raises(psycopg.Error) as refused:
                    conn.execute(statement)
                assert refused.value.sqlstate == "42501", (statement, refused.value)
                conn.rollback()
        assert victim.execute("SELECT 1").fetchone() == (1,)
        assert pooled_victim.execute("SELECT mm_caller()").fetchone() == (b.role,)


def test_what_a_token_leaves_on_a_pooled_connection_never_reaches_the_next_one(
        tier: Tier, settings: Settings, make_token: Callable[..., tokens.CreatedToken]) -> None:
    """Session state through the tier (roles, settings, temporary objects, LISTEN, advisory locks,
    prepared statements, a proof) is gone when the server connection goes back to the pool."""
    a, b = make_token("pa", ["PA"]), make_token("pb", ["PB"])
    seeded(settings, b, "PB")
    with tier.connect(a, autocommit=True) as conn:
        left_on = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for statement in ("SET ROLE mcp_memory_rw", "SET search_path = pg_temp, public",
                          "CREATE TEMP TABLE sessions (project_id text)", "LISTEN mm_appends",
                          "SELECT pg_advisory_lock(4242)", "PREPARE left_behind AS SELECT 1",
                          "SET statement_timeout = '1ms'", "SET mm.gateway_role = 'x'"):
            conn.execute(statement)
        conn.execute("SELECT mm_enter(%s)", (a.token,))
    seen = set()
    with tier.connect(b) as other:
        for _ in range(50):  # until the pool lends B the backend A used
            other.execute("SELECT mm_enter(%s)", (b.token,))
            pid = other.execute("SELECT pg_backend_pid()").fetchone()[0]
            seen.add(pid)
            if pid == left_on:
                break
            other.rollback()
        assert left_on in seen, "the pool never lent the same backend again"
        assert other.execute("SELECT current_user, mm_caller(), current_setting('statement_timeout') <> '1ms', "
                             "current_setting('search_path') NOT LIKE 'pg_temp%%'").fetchone() == (
            tier.gateway, b.role, True, True)
        assert other.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)
        assert other.execute("SELECT count(*) FROM pg_listening_channels()").fetchone() == (0,)
        assert other.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                             "AND pid = pg_backend_pid()").fetchone() == (0,)
        assert other.execute("SELECT count(*) FROM sessions WHERE project_id = 'PB'").fetchone() == (1,)


def test_with_its_own_proof_a_token_works_and_sees_only_its_own(
        tier: Tier, settings: Settings, make_token: Callable[..., tokens.CreatedToken]) -> None:
    a, b = make_token("pa", ["PA"]), make_token("pb", ["PB"])
    seeded(settings, a, "PA")
    seeded(settings, b, "PB")
    with tier.connect(a) as conn:
        assert conn.execute("SELECT mm_enter(%s)", (a.token,)).fetchone() == (a.role,)
        assert conn.execute("SELECT session_user, current_user, mm_caller()").fetchone() == (
            tier.gateway, tier.gateway, a.role)
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
            victim.execute("SELECT set_config('mm.gateway_role', %s, true)", (a.role,))
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


def test_defaults_a_token_sets_on_the_gateway_are_undone_at_the_next_proof(
        tier: Tier, settings: Settings, admin_dsn: str, make_token: Callable[..., tokens.CreatedToken]) -> None:
    """PostgreSQL lets a role change its own session defaults, and the gateway is every pooled
    backend's login: what a token sets there is undone by the next transaction's proof, and the
    backends that may have started with it are ended, so later transactions run with none of it."""
    a, b = make_token("pa", ["PA"]), make_token("pb", ["PB"])
    seeded(settings, b, "PB")
    with tier.connect(a, autocommit=True) as conn:
        for setting in ("default_transaction_read_only = on", "statement_timeout = '1ms'"):
            conn.execute(sql.SQL("ALTER ROLE {} SET " + setting).format(sql.Identifier(tier.gateway)))
        conn.execute(sql.SQL("ALTER ROLE {} IN DATABASE {} SET work_mem = '64kB'").format(
            sql.Identifier(tier.gateway), sql.Identifier(tier.dbname)))
    with tier.connect(b) as other:
        assert other.execute("SELECT mm_enter(%s)", (b.token,)).fetchone() == (b.role,)
        other.commit()
    as_admin = make_conninfo(admin_dsn, dbname=tier.dbname)
    with psycopg.connect(as_admin, autocommit=True) as admin:
        assert role_state(admin, tier.gateway)[4] is None  # no defaults left
    host = build(replace(settings, dsn=tier.dsn(b), password=b.token, pgbouncer=True, gateway=True,
                         auto_migrate=False, pool_min=0, pool_max=1), application_name="b@tier")
    try:
        for _ in range(5):  # each on a pooled backend started after the repair
            sid = host.create_session("PB").session_id
            assert host.append_messages(sid, [{"role": "user", "content": "still writable",
                                               "append_id": f"msg_{uuid.uuid4().hex}"}]).seqs == [1]
    finally:
        host.db.close()


def test_a_pooled_host_is_set_up_by_login_as_the_guide_says(
        tier: Tier, settings: Settings, make_token: Callable[..., tokens.CreatedToken], profile: dict[str, str]) -> None:
    """`login --pgbouncer --direct-dsn` (what install.sh --pgbouncer runs): the token is checked
    through the tier (proved by the forced gateway) and directly, stored for both addresses, and the
    host then works with nothing else given: doctor, append, search, and a live tail that wakes."""
    import subprocess
    import sys

    a = make_token("pa", ["PA"])
    env = {k: v for k, v in profile.items() if k != "MCP_MEMORY_DSN"}
    cli = [sys.executable, "-m", "mcp_memory"]
    direct = tokens.role_dsn(tier.direct, a.role)
    done = subprocess.run([*cli, "login", "--dsn", tier.dsn(a), "--pgbouncer", "--direct-dsn", direct, "--token-stdin"],
                          input=a.token + "\n", env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"logged in as {a.role}" in done.stdout and "projects: PA" in done.stdout
    doctor = subprocess.run([*cli, "doctor", "--json"], env=env, capture_output=True, text=True, timeout=120)
    checks = {c["name"]: c for c in __import__("json").loads(doctor.stdout)["checks"]}
    assert checks["database"]["ok"] and checks["schema"]["ok"], checks
    assert all(c["ok"] for c in checks.values()), [c for c in checks.values() if not c["ok"]]
    from mcp_memory.config import load_settings

    host = build(load_settings(environ=env), application_name="pooled@tier")
    try:
        assert host.db.settings.gateway and host.db.settings.pgbouncer
        sid = host.create_session("PA").session_id
        host.append_message(sid, {"role": "user", "content": "pelican routing", "append_id": f"msg_{uuid.uuid4().hex}"})
        assert [m.session_id for m in host.search_messages("pelican", project_id="PA").matches] == [sid]
        later = threading.Timer(0.5, lambda: host.append_message(sid, {"role": "assistant", "content": "woke",
                                                                      "append_id": f"msg_{uuid.uuid4().hex}"}))
        later.start()
        woke = host.read_session(sid, after_seq=1, wait_seconds=10)
        later.join()
        assert [m.seq for m in woke.messages] == [2]
        assert host.appends.listener.poll_seconds is None  # LISTEN on the direct connection, not polling
    finally:
        host.db.close()


def test_a_rotated_token_on_a_pooled_host_is_the_printed_login_and_nothing_else(
        tier: Tier, settings: Settings, owner_db: Database, make_token: Callable[..., tokens.CreatedToken],
        profile: dict[str, str]) -> None:
    """`token rotate` prints: `mcp-memory login` with the host's DSN as it is. On a pooled host that
    login keeps pgbouncer, gateway and direct_dsn and stores the new token for the direct address too
    (else doctor and the live tail go on with the old token there); a server running since before the
    rotation reads the stored token again once its old one is refused."""
    import subprocess
    import sys

    from mcp_memory.config import load_settings

    a = make_token("pr", ["PR"])
    env = {k: v for k, v in profile.items() if k != "MCP_MEMORY_DSN"}
    cli = [sys.executable, "-m", "mcp_memory"]
    direct = tokens.role_dsn(tier.direct, a.role)
    first = subprocess.run([*cli, "login", "--dsn", tier.dsn(a), "--pgbouncer", "--direct-dsn", direct, "--token-stdin"],
                           input=a.token + "\n", env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    running = build(load_settings(environ=env), application_name="pooled@rotation")
    try:
        sid = running.create_session("PR").session_id
        new = tokens.rotate(owner_db, a.role, grace=timedelta(0)).created
        again = subprocess.run([*cli, "login", "--dsn", tier.dsn(a), "--token-stdin"], input=new.token + "\n",
                               env=env, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        kept = load_settings(environ=env)
        assert kept.pgbouncer and kept.gateway and kept.direct_dsn == direct
        doctor = subprocess.run([*cli, "doctor", "--json"], env=env, capture_output=True, text=True, timeout=120)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        outcomes = []
        for n in range(2):  # the cached old token is refused once, then the stored new one is read
            try:
                running.append_message(sid, {"role": "user", "content": f"turn {n}", "append_id": f"msg_{uuid.uuid4().hex}"})
                outcomes.append("ok")
            except Unauthorized:
                outcomes.append("refused")
        assert outcomes[-1] == "ok", outcomes
    finally:
        running.db.close()
