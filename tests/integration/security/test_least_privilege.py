# ruff: noqa: F811  (tests take the imported fixture `world` by name)
"""A raw-SQL attacker holding one token, against what the database lends beyond its projects
(migration 0014, README design note 7): shadowed built-ins, advisory locks, connection caps,
values the write functions store, cross-project metadata, the gateway login of serve-http, and
what a revoked token is told. Each attack runs as the token would run it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from security_support import connect_as, token_service
from test_write_api import b_still_works, refused, world  # noqa: F401 (the fixture `world`: projects A and B)

from mcp_memory.archive import layout
from mcp_memory.cli import main
from mcp_memory.core.messages import payload_digest
from mcp_memory.core.service import Service
from mcp_memory.errors import Forbidden, Invalid, NotFound
from mcp_memory.http.server import prepare
from mcp_memory.security import tokens
from mcp_memory.store import migrate
from mcp_memory.store.db import login_of_token

pytest_plugins = ["security_support"]

# Built-ins the owner's functions call, each shadowed with the inexact argument types a call could
# have matched before 0014, plus some with the built-in's own types. Each shadow, if ever resolved,
# tries to widen the caller's scope and then fails loudly.
SHADOWS = [
    ("hashtextextended", "text, integer", "bigint"),
    ("format", "text, text, integer", "text"),
    ("format", "text, integer", "text"),
    ("to_jsonb", "text", "jsonb"),
    ("pg_has_role", "text, oid, text", "boolean"),
    ("json_build_object", "text, bigint, text, bigint", "json"),
    ("cardinality", "text[]", "integer"),
    ("jsonb_typeof", "jsonb", "text"),
    ("now", "", "timestamptz"),
    ("sha256", "bytea", "bytea"),
    ("convert_to", "text, text", "bytea"),
    ("encode", "bytea, text", "text"),
    ("left", "text, bigint", "text"),
    ("octet_length", "text", "integer"),
    ("length", "text", "integer"),
    ("strpos", "text, text", "integer"),
    ("current_setting", "text", "text"),
    ("pg_notify", "text, text", "void"),
    ("max", "integer", "integer"),
]


def shadow_sql(name: str, args: str, returns: str) -> str:
    if name == "max":  # an aggregate: shadowed by one whose final function raises
        return ("CREATE FUNCTION public.mm_evil_max(integer, integer) RETURNS integer LANGUAGE plpgsql AS $$ BEGIN "
                "INSERT INTO access_token_projects VALUES (current_user, '*'); RAISE EXCEPTION 'shadowed max'; END $$;"
                "CREATE AGGREGATE public.max(integer) (SFUNC = public.mm_evil_max, STYPE = integer)")
    return (f"CREATE FUNCTION public.{name}({args}) RETURNS {returns} LANGUAGE plpgsql AS $$ BEGIN "
            f"INSERT INTO access_token_projects VALUES (current_user, '*'); "
            f"RAISE EXCEPTION 'shadowed {name}({args}) ran as %', current_user; END $$")


def api_calls(conn: psycopg.Connection, session: str) -> None:
    """Every write a host token makes, as raw SQL through the functions."""
    conn.execute("SELECT mm_create_session('ses_00000000-0000-4000-8000-0000000000f1', 'A', 'agent-x', 'title', '{\"k\": 1}')")
    conn.execute("SELECT * FROM mm_append('ses_00000000-0000-4000-8000-0000000000f1', ARRAY['s1', 's2'], ARRAY['user', 'assistant'], "
                 "ARRAY['{\"role\": \"user\", \"content\": \"one\", \"n\": 1.50}', "
                 "'{\"role\": \"assistant\", \"content\": \"two\"}'], NULL, ARRAY[now(), now()])")
    conn.execute("SELECT * FROM mm_set_context('ses_00000000-0000-4000-8000-0000000000f1', 'key', '{\"v\": 1}')")
    conn.execute("SELECT * FROM mm_set_context('ses_00000000-0000-4000-8000-0000000000f1', 'key', '{\"v\": 2}')")
    conn.execute("SELECT mm_snapshot('ses_00000000-0000-4000-8000-0000000000f1', 'snap', '{}')")
    conn.execute("SELECT mm_record_decision('ses_00000000-0000-4000-8000-0000000000f1', 'dec_00000000000000000000000000000099', 1, 'db', "
                 "'use it', 'accepted', NULL, '[]', NULL, '{}', 'team', '')")
    conn.execute("SELECT mm_index_claim('ses_00000000-0000-4000-8000-0000000000f1')")
    conn.execute("SELECT mm_append_channel_key(%s)", (session,))
    conn.execute("SELECT mm_update_session_meta('ses_00000000-0000-4000-8000-0000000000f1', '{\"x\": 2}', '{}', true, 't2', false, NULL)")
    conn.execute("SELECT * FROM mm_agents()")


def test_shadowed_built_ins_never_run_as_the_owner(world, make_token, service: Service, settings,
                                                   admin_dsn: str) -> None:
    """PostgreSQL 14's default ACL (PUBLIC may CREATE in public), as on a database upgraded from 14
    or re-granted by hand: a token shadows the built-ins; none of them ever runs inside the owner's
    functions, and the next `db migrate` takes CREATE back and drops what the token made."""
    token = make_token("a", ["A"])
    with psycopg.connect(settings.dsn, autocommit=True) as admin:
        admin.execute("GRANT CREATE ON SCHEMA public TO PUBLIC")  # PostgreSQL 14's default
    with connect_as(token, autocommit=True) as conn:
        for name, args, returns in SHADOWS:
            conn.execute(shadow_sql(name, args, returns))
        api_calls(conn, str(world["A"]))
        projects = [p for (p,) in conn.execute("SELECT project_id FROM access_token_projects").fetchall()]
        assert projects == ["A"]  # no escalation: the token's scope is what it was
        assert conn.execute("SELECT count(*) FROM sessions WHERE project_id = 'B'").fetchone() == (0,)
        refused(conn, "SELECT * FROM mm_append(%s, ARRAY['x'], ARRAY['user'], "
                      "ARRAY['{\"role\": \"user\", \"content\": \"in B\"}'], NULL, NULL)", (world["B"],))

    migrate.migrate(settings.dsn)  # re-asserts: CREATE back from PUBLIC, the token's objects gone
    with psycopg.connect(settings.dsn, autocommit=True) as admin:
        left = admin.execute("SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner "
                             "WHERE r.rolname = %s", (token.role,)).fetchone()
        assert left == (0,)
        public_create = admin.execute(
            "SELECT count(*) FROM pg_namespace n, aclexplode(n.nspacl) a "
            "WHERE n.nspname = 'public' AND a.grantee = 0 AND a.privilege_type = 'CREATE'").fetchone()
        assert public_create == (0,)
    with connect_as(token, autocommit=True) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(shadow_sql("hashtextextended", "text, integer", "bigint"))
    b_still_works(service, world)


def test_archiving_migrations_and_context_go_on_while_a_token_holds_advisory_locks(
        world, make_token, service: Service, settings, tmp_path: Path, profile, monkeypatch) -> None:
    """A read-only token takes the advisory keys of earlier versions (archiver, migrations, a
    context key of B) and any other it likes: the real archiver exports, `db migrate` finishes and
    B sets its context."""
    squatter = make_token("ro", ["A"], read_only=True)
    keys = [1835884914, 0x6D636D6D, 0x6D6D6172]
    with connect_as(squatter, autocommit=True) as conn:
        for key in keys:
            assert conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (True,)
        conn.execute("SELECT pg_advisory_lock(hashtextextended(%s || ':' || 'plan', 0))", (world["B"],))
        conn.execute("SELECT pg_advisory_lock(1836084589, hashtext(%s))", (world["B"],))
        for key, value in profile.items():
            monkeypatch.setenv(key, value)
        remote = tmp_path / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        assert main(["--dsn", settings.dsn, "archive", "--once", "--repo", str(tmp_path / "arch"),
                     "--remote", str(remote)]) == 0
        assert (tmp_path / "arch" / layout.session_path(str(world["B"]))).exists()
        migrate.migrate(settings.dsn)  # returns: the migration lock is a row no token can lock
        assert service.set_context(str(world["B"]), "plan", {"step": 1}).revision == 1
        service.append_message(str(world["B"]), {"role": "user", "content": "indexed despite the lock"})
    b_state = service.search_messages("indexed despite", project_id="B")
    assert b_state.matches


def test_a_token_is_refused_at_its_connection_cap_while_others_connect(make_token, owner_db, admin_dsn) -> None:
    name = f"mmtest_cap_{__import__('uuid').uuid4().hex[:8]}"
    capped = tokens.create(owner_db, name=name, projects=["A"],
                           limits=tokens.check_limits(connections=2, statement_timeout="30s"))
    other = make_token("other", ["B"])
    held = []
    try:
        held = [connect_as(capped) for _ in range(2)]
        with pytest.raises(psycopg.OperationalError, match="too many connections for role"):
            connect_as(capped)
        with connect_as(other) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with owner_db.connect() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert held[0].execute("SHOW statement_timeout").fetchone() == ("30s",)
        assert held[0].execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("1min",)
    finally:
        for conn in held:
            conn.close()
        tokens.revoke(owner_db, name)
    with pytest.raises(Invalid, match="--connection-limit"):
        tokens.check_limits(connections=0)
    with pytest.raises(Invalid, match="--lock-timeout"):
        tokens.check_limits(lock_timeout="forever")


def test_the_write_functions_refuse_what_cannot_be_read_back(world, make_token, service: Service,
                                                             settings) -> None:
    token = make_token("a", ["A"])
    a = str(world["A"])
    big = json.dumps({"role": "user", "content": "x" * (1024 * 1024 + 1)})
    with connect_as(token, autocommit=True) as conn:
        append = "SELECT * FROM mm_append(%s, ARRAY[%s], ARRAY[%s], ARRAY[%s], NULL, %s)"
        assert "1 MiB" in refused(conn, append, (a, "big", "user", big, None))
        assert "created_at" in refused(conn, append.replace("%s)", "ARRAY['-infinity'::timestamptz])"),
                                       (a, "inf", "user", '{"role": "user", "content": "x"}'))
        assert "created_at" in refused(conn, append.replace("%s)", "ARRAY['40000-01-01'::timestamptz])"),
                                       (a, "far", "user", '{"role": "user", "content": "x"}'))
        assert "differs from the row role" in refused(conn, append, (a, "role", "assistant",
                                                                     '{"role": "user", "content": "x"}', None))
        assert "role must be" in refused(conn, append, (a, "bad", "admin", '{"content": "x"}', None))
        assert "meta is" in refused(conn, "SELECT mm_create_session('ses_meta', 'A', NULL, NULL, %s)",
                                    (json.dumps({"k": "y" * 300_000}),))
        # numbers written as text the client would never write: stored, and hashed as the archiver reads them
        conn.execute(append, (a, "num", "user", '{"role": "user", "content": "n", "price": 1.50, "big": 1e2, '
                                                '"tiny": 0.1000000000000000055511151231257827}', None))
    stored = service.read_session(a).messages[-1]
    with psycopg.connect(settings.dsn) as conn:
        payload, digest = conn.execute("SELECT payload, payload_hash FROM messages WHERE append_id = 'num'").fetchone()
    assert payload_digest(payload) == bytes(digest)  # what export checks before archiving a line
    assert stored.content == "n"
    b_still_works(service, world)


def test_nothing_cross_project_on_channels_agents_or_models(world, make_token, service: Service) -> None:
    a_token, b_token = make_token("a", ["A"]), make_token("b", ["B"])
    service.update_session_meta(str(world["B"]), {"agent_source": "secret-b-agent"})
    with connect_as(a_token, autocommit=True) as listener, connect_as(b_token, autocommit=True) as writer:
        listener.execute("LISTEN mcp_memory_append")
        listener.execute("LISTEN mcp_memory_export")
        writer.execute("SELECT * FROM mm_append(%s, ARRAY['n1'], ARRAY['user'], "
                       "ARRAY['{\"role\": \"user\", \"content\": \"b\"}'], NULL, NULL)", (world["B"],))
        writer.execute("SELECT mm_snapshot(%s, 's', '{}')", (world["B"],))
        seen = list(listener.notifies(timeout=2, stop_after=2))
        assert {n.channel for n in seen} == {"mcp_memory_append", "mcp_memory_export"}
        import hashlib
        plain = hashlib.sha256(str(world["B"]).encode()).hexdigest()
        for n in seen:
            assert n.payload != plain and str(world["B"]) not in n.payload and "snapshot" not in n.payload
        assert "does not exist" in refused(listener, "SELECT mm_append_channel_key(%s)", (world["B"],))
        assert [n.payload for n in seen if n.channel == "mcp_memory_export"] == [""]
        refused(listener, "SELECT * FROM agents")
        names = [r[0] for r in listener.execute("SELECT name FROM mm_agents()").fetchall()]
        assert "secret-b-agent" not in names
        assert "not registered" in refused(listener, "SELECT mm_register_embedding_model('squatted-model', 3)")
    assert any(a.name == "secret-b-agent" for a in service.list_agents())  # the owner still sees all


def test_serve_http_runs_as_a_gateway_that_reads_nothing(world, make_token, owner_db, settings, password_server,
                                                         profile, monkeypatch, capsys) -> None:
    """The gateway login is a member of no token role (migration 0026): as itself, without a
    transaction's proof, it reads no row of any project (only the tables every token shares) and
    writes nothing, and REST serves a read-write and a read-only token each with its own scope. As
    the owner, serve-http refuses unless --as-owner."""
    from rest_support import Server

    gateway = tokens.create_gateway(owner_db, name=f"mmtest_gw_{__import__('uuid').uuid4().hex[:8]}")
    rw, ro = make_token("rw", ["A"]), make_token("ro", ["B"], read_only=True)
    try:
        with psycopg.connect(gateway.dsn, autocommit=True) as conn:
            tables = [t for (t,) in conn.execute(
                "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace "
                "AND c.relkind IN ('r', 'p', 'v')").fetchall()]
            assert "sessions" in tables
            shared = {"embedding_models", "schema_migrations", "synonyms"}  # no project: every token reads them
            for table in sorted(set(tables) - shared):
                try:
                    rows = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
                except psycopg.errors.InsufficientPrivilege:
                    continue
                assert rows == (0,), table
            for role in (rw.role, ro.role):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
            refused(conn, "SELECT * FROM mm_append(%s, ARRAY['g'], ARRAY['user'], "
                          "ARRAY['{\"role\": \"user\", \"content\": \"g\"}'], NULL, NULL)", (world["A"],))
        gw_settings = replace(settings, dsn=gateway.dsn, auto_migrate=False)
        with pytest.raises(Invalid, match="refuses to run as the database owner"):
            prepare(settings, "127.0.0.1", as_owner=False)
        app, registry = prepare(gw_settings, "127.0.0.1", as_owner=False)
        try:
            with Server(app) as server:
                listed = server.call("GET", "/v1/sessions", token=rw.token)
                assert listed.status == 200 and {s["project_id"] for s in listed.body["sessions"]} == {"A"}
                created = server.call("POST", "/v1/sessions", token=rw.token, body={"project_id": "A"})
                assert created.status == 201
                seen = server.call("GET", "/v1/sessions", token=ro.token)
                assert {s["project_id"] for s in seen.body["sessions"]} == {"B"}
                denied = server.call("POST", "/v1/sessions", token=ro.token, body={"project_id": "B"})
                assert denied.status == 403
                assert server.call("GET", "/v1/sessions", token=rw.token[:-3] + "abc").status == 401
        finally:
            registry.close()
        for key, value in profile.items():
            monkeypatch.setenv(key, value)
        assert main(["--dsn", settings.dsn, "serve-http", "--port", "1"]) == 1
        assert "token gateway" in capsys.readouterr().err
    finally:
        with psycopg.connect(password_server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(gateway.role)))


def test_a_revoked_token_is_forbidden_not_unavailable(make_token, owner_db, settings) -> None:
    created = make_token("gone", ["A"])
    svc = token_service(settings, created)
    try:
        svc.create_session("A")
        tokens.revoke(owner_db, created.role)
        for _ in range(2):  # the open pool's connections were ended; a new login is refused
            with pytest.raises(Forbidden) as raised:
                svc.create_session("A")
            assert raised.value.code == "forbidden" and "revoked" in str(raised.value)
    finally:
        svc.db.close()


def test_a_capture_hook_with_a_revoked_token_keeps_the_session_in_the_spool(make_token, owner_db, profile,
                                                                             tmp_path: Path) -> None:
    """The hook never fails the agent, but a refused credential is not an outage: it is reported in one
    line on stderr and by `doctor`, what was read waits in the spool with the `[forbidden]` reason,
    and the first run with a new token delivers it exactly once."""
    import sys

    from agent_fixtures import FIXTURES

    created = make_token("hook", ["s"])
    source = max((FIXTURES / "claude-code").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(source.read_text())
    hook = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript), "session_id": "x",
                       "cwd": str(tmp_path)})

    def run(token, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mcp_memory", "--dsn", token.dsn, *args],
                              env={**profile, "MCP_MEMORY_PASSWORD": token.token},
                              capture_output=True, text=True, timeout=120, input=stdin)

    def stored() -> int:
        with owner_db.connect() as conn:
            return conn.execute("SELECT count(*) FROM messages WHERE project_id = 's'").fetchone()[0]

    tokens.revoke(owner_db, created.role)
    hooked = run(created, "sync", "claude-code", "--hook", "--project", "s", stdin=hook)
    assert hooked.returncode == 0 and hooked.stdout == ""  # never fails the agent
    lines = hooked.stderr.strip().splitlines()
    assert len(lines) == 1 and "[forbidden]" in lines[0] and "revoked" in lines[0], hooked.stderr
    assert "kept in the spool" in lines[0] and "mcp-memory login" in lines[0]
    listed = json.loads(run(created, "spool", "list", "--json").stdout)["files"]
    assert listed and all(f["reason"].startswith("[forbidden]") for f in listed), listed
    doctor = run(created, "doctor", "--json")
    assert doctor.returncode == 1
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert not checks["database"]["ok"] and "revoked" in checks["database"]["detail"]
    assert not checks["capture"]["ok"] and "refused" in checks["capture"]["detail"]
    assert "wait in the spool" in checks["capture"]["detail"]
    assert stored() == 0

    renewed = make_token("hook2", ["s"])  # the admin issues a new token: the next run delivers what waits
    again = run(renewed, "sync", "claude-code", "--hook", "--project", "s", stdin=hook)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    delivered = stored()
    assert delivered > 0
    assert json.loads(run(renewed, "spool", "list", "--json").stdout)["files"] == []
    once_more = run(renewed, "sync", "claude-code", "--hook", "--project", "s", stdin=hook)
    assert once_more.returncode == 0 and once_more.stderr == "", once_more.stderr
    assert stored() == delivered  # exactly once: the turns read before are not read again
    with owner_db.connect() as conn:
        dup = conn.execute("SELECT count(*) - count(DISTINCT append_id) FROM messages WHERE project_id = 's'")
        assert dup.fetchone()[0] == 0


def test_an_expired_token_is_forbidden_everywhere(make_token, owner_db, settings, rest_server_for) -> None:
    created = tokens.create(owner_db, name=f"mmtest_exp_{__import__('uuid').uuid4().hex[:8]}", projects=["A"],
                            expires=tokens.check_expires("90min"))
    try:
        listed = {t.role: t for t in tokens.list_(owner_db)}
        assert listed[created.role].expires is not None
        with connect_as(created) as conn:  # valid for now
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with owner_db.connect(autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER ROLE {} VALID UNTIL '2000-01-01'").format(sql.Identifier(created.role)))
        svc = token_service(settings, created)
        try:
            with pytest.raises(Forbidden, match="expired"):
                svc.create_session("A")
        finally:
            svc.db.close()
        reply = rest_server_for(settings).call("GET", "/v1/sessions", token=created.token)
        assert reply.status == 401 and reply.body["error"]["code"] == "forbidden"
    finally:
        tokens.revoke(owner_db, created.role)
    for bad in ("0d", "forever", "4000d"):
        with pytest.raises(Invalid, match="--expires"):
            tokens.check_expires(bad)


def test_a_token_made_with_expires_9s_works_then_is_forbidden(owner_db, settings, rest_server_for, profile,
                                                               capsys, monkeypatch, tmp_path) -> None:
    """`token create --expires 9s` (issue 43): seconds are a duration too, and the token really ends."""
    name = f"mmtest_exp9_{__import__('uuid').uuid4().hex[:8]}"
    server = rest_server_for(settings)  # started first: its start-up takes nothing from the token's 9 s
    for key, value in profile.items():
        monkeypatch.setenv(key, value)
    try:
        before = datetime.now(UTC)
        assert main(["--dsn", settings.dsn, "token", "create", "--name", name, "--project", "A",
                     "--expires", "9s", "--json"]) == 0
        made = json.loads(capsys.readouterr().out)
        until = datetime.fromisoformat(made["expires"])
        assert before + timedelta(seconds=9) <= until <= datetime.now(UTC) + timedelta(seconds=9)
        created = tokens.CreatedToken(name=name, role=made["role"], token=made["token"], dsn=made["dsn"],
                                      projects=["A"], read_only=False, archiver=False)
        with connect_as(created) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert server.call("GET", "/v1/sessions", token=created.token).status == 200
        assert datetime.now(UTC) < until  # so the two checks above ran while the token was valid
        time.sleep((until - datetime.now(UTC)).total_seconds() + 1)
        with pytest.raises(psycopg.OperationalError):
            connect_as(created)
        svc = token_service(settings, created)
        try:
            with pytest.raises(Forbidden, match="expired"):
                svc.create_session("A")
        finally:
            svc.db.close()
        reply = server.call("GET", "/v1/sessions", token=created.token)
        assert reply.status == 401 and reply.body["error"]["code"] == "forbidden"
        host = {**profile, "MCP_MEMORY_HOME": str(tmp_path / "host"),
                "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
        logged = subprocess.run([sys.executable, "-m", "mcp_memory", "login", "--dsn", made["dsn"], "--token-stdin"],
                                input=created.token + "\n", env=host, capture_output=True, text=True, timeout=120)
        assert logged.returncode == 1 and "[forbidden]" in logged.stderr, logged.stderr
        assert not (tmp_path / "host" / "mcp-memory" / "credentials.json").exists()  # nothing stored
    finally:
        tokens.revoke(owner_db, name)


@pytest.fixture
def rest_server_for(owner_db):
    """A REST server on the owner's pool (as the tests of test_rest.py run it), started on demand."""
    from contextlib import ExitStack

    from rest_support import Server

    from mcp_memory.http.app import HttpOptions, create_app
    from mcp_memory.http.auth import TokenRegistry
    from mcp_memory.wiring import build

    stack = ExitStack()

    def start(settings):
        registry = TokenRegistry(settings, owner_db.dsn(), lambda s: build(s, application_name="mcp-memory test"),
                                 recheck_seconds=0)
        stack.callback(registry.close)
        return stack.enter_context(Server(create_app(registry, HttpOptions(rate_limit=0))))

    with stack:
        yield start


def test_rotation_keeps_the_old_token_for_the_grace_period_then_only_the_new(
        make_token, owner_db, settings, rest_server_for, profile, capsys, monkeypatch) -> None:
    name = f"mmtest_rot_{__import__('uuid').uuid4().hex[:8]}"
    first = tokens.create(owner_db, name=name, projects=["A", "B"], read_only=True,
                          limits=tokens.check_limits(connections=3))
    try:
        for key, value in profile.items():
            monkeypatch.setenv(key, value)
        assert main(["--dsn", settings.dsn, "token", "rotate", name, "--grace", "1h", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["name"] == name and out["role"] == f"{name}_r2" and out["previous"] == [name]
        second = tokens.CreatedToken(name=name, role=out["role"], token=out["token"], dsn=out["dsn"],
                                     projects=["A", "B"], read_only=True, archiver=False)
        server = rest_server_for(settings)
        for created in (first, second):  # both work during the grace period, with the same scope
            with connect_as(created) as conn:
                scope = [p for (p,) in conn.execute("SELECT project_id FROM access_token_projects ORDER BY 1")]
                assert scope == ["A", "B"]
                assert "read-only" in refused(conn, "SELECT mm_create_session('ses_x', 'A', NULL, NULL, '{}')")
            assert server.call("GET", "/v1/sessions", token=created.token).status == 200
        with owner_db.connect() as conn:
            assert conn.execute("SELECT rolconnlimit FROM pg_roles WHERE rolname = %s",
                                (second.role,)).fetchone() == (3,)
        # one token to the database: the new login is the same caller, and a DSN that still names
        # the token's first role logs in with the new token as its new role (migration 0029)
        same_dsn = tokens.CreatedToken(name=name, role=name, token=second.token, dsn=first.dsn, projects=["A", "B"],
                                       read_only=True, archiver=False)
        with psycopg.connect(login_of_token(make_conninfo(first.dsn, password=second.token))) as conn:
            assert conn.execute("SELECT session_user::text, mm_caller(), mm_login_role()").fetchone() == (
                second.role, name, second.role)
            assert [r for (r,) in conn.execute("SELECT role_name FROM access_tokens ORDER BY 1")] == [name, second.role]
        assert same_dsn.role == name
        assert main(["--dsn", settings.dsn, "token", "rotate", name, "--grace", "0s", "--json"]) == 0
        third = json.loads(capsys.readouterr().out)
        assert third["role"] == f"{name}_r3" and sorted(third["previous"]) == sorted([name, f"{name}_r2"])
        with pytest.raises(psycopg.OperationalError):  # grace 0: the earlier generations are over
            connect_as(second)
        assert server.call("GET", "/v1/sessions", token=first.token).status == 401
        assert server.call("GET", "/v1/sessions", token=third["token"]).status == 200
        listed = [t for t in tokens.list_(owner_db) if t.name == name]
        assert {t.role for t in listed} == {name, f"{name}_r2", f"{name}_r3"}
    finally:
        tokens.revoke(owner_db, name)  # every generation
    with owner_db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname LIKE %s", (name + "%",)).fetchone() == (0,)
    with pytest.raises(NotFound):
        tokens.rotate(owner_db, name, grace=tokens.check_grace("1h"))


# Types a call's argument may have where the built-in's parameter is polymorphic or of another type,
# so that a token's function with these types would match a call more closely than the built-in.
_ALTERNATES = {
    "any": ["text", "integer", "bigint", "jsonb", "boolean"], "anyelement": ["text", "integer", "bigint", "jsonb"],
    "anynonarray": ["text", "integer", "bigint"], "anycompatible": ["text", "integer", "bigint"],
    "anycompatiblenonarray": ["text", "integer"], "anyarray": ["text[]", "bigint[]", "integer[]"],
    "anycompatiblearray": ["text[]", "bigint[]"], "name": ["text"], "bigint": ["integer"], '"char"': ["text"],
    "double precision": ["numeric", "integer"], "integer": ["bigint"], "oid": ["integer", "bigint"],
    "regclass": ["text"], "regrole": ["text"],
}
_POLYMORPHIC = {"anyelement", "anynonarray", "anycompatible", "anycompatiblenonarray", "anyarray",
                "anycompatiblearray", "any", "record"}


def _generated_shadows(conn: psycopg.Connection) -> list[str]:
    """CREATE FUNCTION statements in public for every built-in our functions call by name, with each
    inexact argument type a call could have (one parameter varied at a time, all varied, a variadic
    list of 1–3), each raising when it runs."""
    names = [n for (n,) in conn.execute(
        "SELECT DISTINCT m[1] FROM pg_proc p, regexp_matches(p.prosrc, '([a-z_][a-z0-9_]*)\\s*\\(', 'g') m "
        "WHERE p.pronamespace = 'public'::regnamespace AND (p.proname LIKE 'mm\\_%' OR p.proname LIKE 'mcp\\_%')")]
    overloads = conn.execute(
        "SELECT p.proname, array(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) t), p.provariadic <> 0, "
        "format_type(p.prorettype, NULL), p.proretset FROM pg_proc p "
        "WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f' AND p.proname = ANY (%s) "
        "AND p.pronargs <= 4", (names,)).fetchall()
    statements: set[str] = set()
    for name, args, variadic, returns, retset in overloads:
        if returns in ("internal", "trigger", "cstring", "event_trigger", "void") or "internal" in args:
            continue
        if returns in _POLYMORPHIC or returns.startswith("any"):
            returns = "text"
        signatures = [list(args)]
        for i, arg in enumerate(args):
            for alt in _ALTERNATES.get(arg, []):
                signatures.append([*args[:i], alt, *args[i + 1:]])
        signatures.append([_ALTERNATES.get(a, [a])[0] for a in args])
        if variadic:
            head = args[:-1]
            for k in (1, 2, 3):
                for alt in ("text", "integer", "bigint"):
                    signatures.append([*head, *([alt] * k)])
        for sig in signatures:
            if any(t in _POLYMORPHIC or t.startswith("any") for t in sig):
                continue
            arglist = ", ".join(sig)
            statements.add(
                f"CREATE FUNCTION public.{name}({arglist}) RETURNS {'SETOF ' if retset else ''}{returns} "
                f"LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'shadowed {name}({arglist})'; END $$")
    return sorted(statements)


def test_generated_shadows_of_every_called_built_in_never_run(world, make_token, service: Service, settings) -> None:
    """The same attack, generated: every built-in the owner's functions call, shadowed with every
    inexact argument type a call could carry. Every write, queue and index function then runs as a
    token (and the queue functions as an archiver) without reaching one of them."""
    writer, archiver = make_token("w", ["A"]), make_token("arch", ["A"], archiver=True)
    with psycopg.connect(settings.dsn, autocommit=True) as admin:
        admin.execute("GRANT CREATE ON SCHEMA public TO PUBLIC")
        statements = _generated_shadows(admin)
    created = 0
    with connect_as(writer, autocommit=True) as conn:
        for statement in statements:
            try:
                conn.execute(statement)
                created += 1
            except psycopg.Error:
                pass  # a signature PostgreSQL does not accept for a user function
        assert created > 80, created
        api_calls(conn, str(world["A"]))
        sid = "ses_00000000-0000-4000-8000-0000000000f1"
        conn.execute("SELECT mm_index_messages(%s, ARRAY[1, 2]::bigint[], ARRAY[1, 1], ARRAY['one', 'two'], "
                     "ARRAY['one', 'two'], ARRAY[1, 1]::bigint[], 3::smallint, 2)", (sid,))
        conn.execute("SELECT mm_forget_session_index(%s, 3::smallint)", (sid,))
        snap = conn.execute("SELECT snapshot_id FROM snapshots WHERE session_id = %s", (sid,)).fetchone()[0]
        conn.execute("SELECT mm_fork(%s, 'ses_00000000-0000-4000-8000-0000000000f2', 'x', 't', '{}')", (snap,))
        conn.execute("SELECT mm_update_decision('dec_00000000000000000000000000000099', 1, 'rejected', 's', 'r', "
                     "'[]', '{}', '')")
        conn.execute("SELECT mm_record_relay(%s, 'codex', 'native-1', ARRAY['s1'])", (sid,))
        conn.execute("SELECT mm_register_embedding_model('use-multilingual-v3', 512)")
    with connect_as(archiver, autocommit=True) as conn:
        assert conn.execute("SELECT mm_archive_acquire('w:1', 600)").fetchone() == (True,)
        jobs = [j for (j,) in conn.execute("SELECT job_id FROM mm_archive_claim('w:1', 30, 10, NULL)")]
        assert jobs
        conn.execute("SELECT mm_archive_heartbeat('w:1', 30)")
        conn.execute("SELECT mm_archive_mark_failed(%s, 'e', false, 0)", (jobs[0],))
        conn.execute("SELECT mm_archive_requeue(NULL)")
        conn.execute("SELECT mm_archive_release_running()")
        jobs = [j for (j,) in conn.execute("SELECT job_id FROM mm_archive_claim('w:1', 30, 10, NULL)")]
        conn.execute("SELECT mm_archive_mark_done(%s::bigint[], %s::text[])", (jobs, ["a" * 40] * len(jobs)))
        conn.execute("SELECT * FROM mm_archive_nodes()")
        assert conn.execute("SELECT mm_archive_release()").fetchone() == (True,)
    with connect_as(writer, autocommit=True) as conn:
        assert [p for (p,) in conn.execute("SELECT project_id FROM access_token_projects")] == ["A"]
    migrate.migrate(settings.dsn)
    with psycopg.connect(settings.dsn, autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner WHERE r.rolname = %s",
                             (writer.role,)).fetchone() == (0,)
    b_still_works(service, world)


@pytest.mark.anyio
async def test_an_agent_over_stdio_is_told_forbidden_when_its_token_is_revoked(make_token, owner_db, profile) -> None:
    """What the agent's model sees, through the real MCP client and `mcp-memory serve`: [forbidden]
    naming the revoked token, not `[unavailable] … retry later`."""
    import sys

    from mcp import Client, StdioServerParameters

    created = make_token("agent", ["A"])
    env = {**profile, "MCP_MEMORY_DSN": created.dsn, "MCP_MEMORY_PASSWORD": created.token}
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_memory", "serve"], env=env)
    async with Client(params, mode="legacy", read_timeout_seconds=30) as c:
        made = await c.call_tool("create_session", {"project_id": "A"})
        assert not made.is_error, made.content
        tokens.revoke(owner_db, created.role)
        for _ in range(2):
            refused_call = await c.call_tool("create_session", {"project_id": "A"})
            assert refused_call.is_error
            text = refused_call.content[0].text
            assert text.startswith("[forbidden]") and "revoked" in text, text
