# ruff: noqa: F811  (tests take the imported fixture `world` by name)
"""query_memory (core/query.py, migration 0019): one read-only SELECT over the mm_read views, as a
token holder runs it (its own login: token_service; serve-http's shared owner pool with SET LOCAL
ROLE: REST) and as the owner, through the library, the official MCP client, REST and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psycopg
import pytest
from mcp import Client
from rest_support import Server
from security_support import token_service
from test_write_api import world  # noqa: F401 (the fixture `world`: projects A and B)

from mcp_memory.core import query
from mcp_memory.core.service import Service
from mcp_memory.errors import Invalid, Unavailable
from mcp_memory.mcp.server import build_server
from mcp_memory.store import query_store

pytest_plugins = ["security_support", "rest_support"]  # fixtures: make_token …, rest


@pytest.fixture
def token_a(world, make_token, settings):
    """The service of a host holding a read/write token of project A (its own login)."""
    svc = token_service(settings, make_token("qa", ["A"]))
    try:
        yield svc
    finally:
        svc.db.close()


def refused(svc: Service, sql: str, *fragments: str) -> str:
    with pytest.raises(Invalid) as caught:
        svc.query_memory(sql)
    message = str(caught.value)
    assert all(f in message for f in fragments), message
    return message


def in_database(svc: Service, sql: str, *fragments: str) -> str:
    """The database's own confinement, past the parse-tree check (a statement it would refuse):
    what holds if that check ever let something through."""
    with pytest.raises(Invalid) as caught:
        query_store.run(svc.db, sql, rows=10, timeout=3.0, cell_chars=query.CELL_CHARS,
                        max_chars=query.MAX_RESULT_CHARS, work_mem=query.WORK_MEM)
    message = str(caught.value)
    assert all(f in message for f in fragments), message
    return message


def table_counts(service: Service) -> list:
    return service.query_memory("SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM messages), "
                                "(SELECT count(*) FROM decisions), (SELECT count(*) FROM snapshots), "
                                "(SELECT count(*) FROM context)").rows


WRITES = [
    ("INSERT INTO sessions (session_id, project_id) VALUES ('ses_00000000-0000-4000-8000-000000000001', 'A')",
     "not INSERT"),
    ("UPDATE sessions SET title = 'x'", "not UPDATE"),
    ("DELETE FROM messages", "not DELETE"),
    ("DROP VIEW messages", "not DROP"),
    ("CREATE TABLE t (x int)", "not CREATE"),
    ("TRUNCATE messages", "not TRUNCATE"),
    ("COPY (SELECT 1) TO STDOUT", "not COPY"),
    ("SET ROLE postgres", "not SET"),
    ("  /* a comment first */ -- and a line\n GRANT SELECT ON messages TO PUBLIC", "not GRANT"),
    ("SELECT 1; DELETE FROM messages", "one statement"),
    ("SELECT 1 ; ; SELECT 2", "one statement"),
    ("", "empty"),
    ("-- only a comment", "empty"),
]


@pytest.mark.parametrize(("sql", "rule"), WRITES)
def test_statements_other_than_one_query_are_refused_before_sending(token_a, sql, rule) -> None:
    refused(token_a, sql, rule)


@pytest.mark.parametrize(("sql", "rule"), [
    # refused by the database: the lexical check lets them through
    ("WITH d AS (DELETE FROM messages RETURNING 1) SELECT * FROM d", "sql"),
    ("WITH d AS (UPDATE sessions SET title = 'x' RETURNING 1) SELECT count(*) FROM d", "sql"),
    ("SELECT * FROM sessions FOR UPDATE", "sql"),
    ("SELECT mm_append(%s, ARRAY['x'], ARRAY['user'], ARRAY['{\"role\": \"user\", \"content\": \"injected\"}'], NULL, "
     "NULL)", "does not exist"),
    ("SELECT public.mm_append(%s, ARRAY['x'], ARRAY['user'], ARRAY['{\"role\": \"user\", \"content\": \"x\"}'], NULL, "
     "NULL)", "permission denied for function mm_append"),
    ("SELECT * FROM public.mm_create_session('ses_00000000-0000-4000-8000-000000000002', 'A', NULL, NULL, '{}')",
     "permission denied"),
    ("SELECT public.mm_set_context(%s, 'k', '1')", "permission denied"),
    ("SELECT set_config('role', 'postgres', true)", "may not change the role"),
    ("SELECT set_config('session_authorization', 'postgres', true)", "may not change the role"),
    ("SELECT query_to_xml('select set_config(''role'', ''postgres'', true)', true, true, '')", "may not change the role"),
    ("SELECT pg_read_file('/etc/hostname')", "permission denied for function pg_read_file"),
    ("SELECT * FROM public.messages", "permission denied for table messages"),
    ("SELECT * FROM public.access_tokens", "permission denied for table access_tokens"),
    ("SELECT * FROM pg_catalog.pg_authid", "permission denied"),
    ("SELECT 1 UNION ALL (SELECT 2); SELECT 3 -- ; in a comment", "one"),
    ("SELECT nosuchcolumn FROM sessions", "nosuchcolumn"),
    ("SELECT * FROM nosuchview", "nosuchview"),
])
def test_writes_calls_and_other_tables_are_refused_by_the_database(token_a, world, service, sql, rule) -> None:
    before = table_counts(service)
    statement = sql.replace("%s", f"'{world['A']}'")
    message = in_database(token_a, statement, rule)
    assert message.startswith("sql"), message  # names the rule
    assert refused(token_a, statement).startswith("sql")  # and, through query_memory, before it is sent
    assert table_counts(service) == before
    assert token_a.append_message(str(world["A"]), {"role": "user", "content": "A goes on"}).seq == 3


def test_the_role_stays_the_callers(token_a, world, service) -> None:
    in_database(token_a, "SELECT set_config('role', 'postgres', true), count(*) FROM messages", "may not change the role")
    who = query_store.run(token_a.db, "SELECT current_user::text, public.mm_read_caller()", rows=1, timeout=3.0,
                          cell_chars=100, max_chars=1000, work_mem=query.WORK_MEM).rows[0]
    assert who[0] == "mcp_memory_reader" and who[1].startswith("mmtest_qa_")
    assert token_a.query_memory("SELECT DISTINCT project_id FROM messages").rows == [["A"]]


def test_another_projects_rows_are_invisible(token_a, world, service) -> None:
    b = str(world["B"])
    service.set_context(b, "stack", {"db": "postgres"})
    service.record_decision(b, "db", "B's private choice", visibility="private")
    public = service.record_decision(b, "api", "B's public choice", visibility="public").decision_id
    for view in ("sessions", "messages", "context", "snapshots"):
        assert token_a.query_memory(f"SELECT count(*) FROM {view} WHERE project_id = 'B'").rows == [[0]], view
        assert service.query_memory(f"SELECT count(*) > 0 FROM {view} WHERE project_id = 'B'").rows == [[True]], view
    decisions = token_a.query_memory("SELECT decision_id FROM decisions WHERE project_id = 'B'").rows
    assert decisions == [[public]]  # public decisions are readable by every token, as with raw SQL
    assert token_a.query_memory(f"SELECT count(*) FROM messages WHERE session_id = '{b}'").rows == [[0]]


def test_runaway_queries_are_cut(token_a) -> None:
    started = time.monotonic()
    refused(token_a, "SELECT count(*) FROM generate_series(1, 1000000000000)", "query cancelled after 3 s (statement timeout")
    assert time.monotonic() - started < 6
    started = time.monotonic()
    in_database(token_a, "SELECT set_config('statement_timeout', '0', false), pg_sleep(10)", "cancelled after 3 s")
    assert time.monotonic() - started < 6
    started = time.monotonic()
    huge = token_a.query_memory("SELECT a.n, b.n FROM generate_series(1, 1000000) a(n), generate_series(1, 1000000) b(n)",
                                limit=50)
    assert huge.truncated and huge.row_count == 50 and huge.rows[0] == [1, 1]
    assert time.monotonic() - started < 3
    exact = token_a.query_memory("SELECT n FROM generate_series(1, 50) n", limit=50)
    assert not exact.truncated and exact.row_count == 50
    wide = token_a.query_memory("SELECT repeat('x', 1999) FROM generate_series(1, 1000)", limit=1000)
    assert wide.truncated and 400 < wide.row_count < 600  # the output bound (1 MB of JSON) stops the rows
    cell = token_a.query_memory("SELECT repeat('é', 5000) AS t, jsonb_build_object('k', repeat('y', 3000)) AS j")
    assert cell.cut_cells == 2
    assert cell.rows[0][0] == "é" * query.CELL_CHARS + "…[cut: 5000 chars]"
    assert cell.rows[0][1].endswith("…[cut: 3009 chars of JSON]")


def test_the_pooled_connection_is_left_as_it_was(token_a, world, service) -> None:
    query_store.run(token_a.db, "SELECT set_config('search_path', 'nowhere', false), set_config('statement_timeout', "
                    "'1', false), set_config('default_transaction_read_only', 'on', false), pg_advisory_lock(4242)",
                    rows=1, timeout=3.0, cell_chars=100, max_chars=1000, work_mem=query.WORK_MEM)
    for _ in range(3):  # every pooled connection of the token service answers as before
        assert token_a.append_message(str(world["A"]), {"role": "user", "content": "still writable"}).duplicate is False
        token_a.list_sessions(project_id="A")
    with psycopg.connect(service.settings.dsn) as conn:
        held = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242").fetchone()
    assert held == (0,)


def test_a_real_question_sessions_per_agent_this_week(token_a, service) -> None:
    for agent, n in (("claude-code", 3), ("codex", 1)):
        for i in range(n):
            sid = token_a.create_session("A", {"agent_source": agent, "title": f"payments {i}"}).session_id
            token_a.append_message(sid, {"role": "user", "content": f"fix the payments timeout {i}"})
    service.create_session("B", {"agent_source": "gemini", "title": "payments in B"})
    result = token_a.query_memory(
        "SELECT s.agent_source, count(DISTINCT s.session_id) AS sessions FROM sessions s "
        "JOIN messages m ON m.session_id = s.session_id "
        "WHERE s.created_at > now() - interval '7 days' AND m.text ILIKE '%payments%' "
        "GROUP BY 1 ORDER BY 2 DESC;  -- one trailing semicolon is fine")
    assert [(c.name, c.type) for c in result.columns] == [("agent_source", "text"), ("sessions", "bigint")]
    assert result.rows == [["claude-code", 3], ["codex", 1]] and not result.truncated
    assert result.elapsed_ms > 0


def test_lexical_check_ignores_strings_identifiers_and_comments() -> None:
    for sql in ("SELECT ';' AS semi", "SELECT $x$ ; DELETE $x$", 'SELECT 1 AS "a;b"', "/* ; /* nested ; */ */ SELECT 1",
                "WITH x AS (SELECT 1) SELECT * FROM x", "VALUES (1), (2)", "TABLE sessions", "(SELECT 1)",
                "SELECT E'\\';' AS s", "select 1;\n-- done\n"):
        assert query.check(sql) == sql
    for sql in ("SELECT ';'; DELETE FROM x", "EXPLAIN ANALYZE SELECT 1", "DO $$ BEGIN END $$", "CALL p()"):
        with pytest.raises(Invalid):
            query.check(sql)
    with pytest.raises(Invalid, match="at most"):
        query.check("SELECT 1" + " " * query.MAX_SQL_CHARS)


def test_the_owner_queries_as_the_reader_role(world, service) -> None:
    who = service.query_memory("SELECT current_user::text, session_user::text").rows[0]
    assert who[0] == "mcp_memory_reader"
    with psycopg.connect(service.settings.dsn) as conn:
        super_login = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = session_user").fetchone()[0]
        reader = conn.execute("SELECT rolsuper, rolcanlogin FROM pg_roles WHERE rolname = 'mcp_memory_reader'").fetchone()
    assert reader == (False, False)
    assert super_login  # the test server's owner login is a superuser: the query still is not
    assert service.query_memory("SELECT project_id, count(*) FROM sessions GROUP BY 1 ORDER BY 1").rows == [["A", 1], ["B", 1]]
    in_database(service, "SELECT pg_read_file('/etc/hostname')", "permission denied")
    in_database(service, "SELECT set_config('role', 'postgres', true)", "may not change the role")
    in_database(service, "SELECT * FROM public.sessions", "permission denied for table sessions")
    refused(service, "SELECT pg_read_file('/etc/hostname')", "not pg_read_file()")
    refused(service, "SELECT * FROM public.sessions", "not public.sessions")


def test_over_rest_as_a_token_on_the_shared_owner_pool(rest: Server, world, make_token) -> None:
    """serve-http runs the token's transaction on the owner's (superuser) pool with SET LOCAL ROLE:
    the query can neither become the owner nor another token."""
    token = make_token("qrest", ["A"]).token
    other = make_token("qother", ["B"])
    reply = rest.call("POST", "/v1/query", token=token,
                      body={"sql": "SELECT project_id, count(*) AS n FROM messages GROUP BY 1", "limit": 10})
    assert reply.status == 200, reply.body
    assert reply.body["rows"] == [["A", 2]] and reply.body["columns"][1] == {"name": "n", "type": "bigint"}
    for sql in ("SELECT set_config('role', 'postgres', true)", f"SELECT set_config('role', '{other.role}', true)",
                "DELETE FROM messages", "SELECT pg_read_file('/etc/hostname')"):
        reply = rest.call("POST", "/v1/query", token=token, body={"sql": sql})
        assert reply.status == 400 and reply.body["error"]["code"] == "invalid", (sql, reply.body)
    assert rest.call("POST", "/v1/query", token=token, body={"sql": "SELECT 1", "limit": 5000}).status == 400
    assert rest.call("POST", "/v1/query", body={"sql": "SELECT 1"}).status == 401
    spec = rest.call("GET", "/openapi.json").body
    assert spec["paths"]["/v1/query"]["post"]["operationId"] == "query_memory"


@pytest.mark.anyio
async def test_over_the_official_mcp_client(token_a, world) -> None:
    async with Client(build_server(lambda: token_a), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["query_memory"].annotations.read_only_hint is True
        assert "sessions" in tools["query_memory"].description
        result = await client.call_tool("query_memory", {"sql": "SELECT role, text FROM messages ORDER BY seq", "limit": 1})
        assert not result.is_error
        assert result.structured_content["rows"] == [["user", "hello"]] and result.structured_content["truncated"]
        bad = await client.call_tool("query_memory", {"sql": "SELECT 1; DELETE FROM messages"})
        assert bad.is_error and bad.content[0].text.startswith("[invalid] sql must be one statement")
        slow = await client.call_tool("query_memory", {"sql": "SELECT count(*) FROM generate_series(1, 1000000000000)"})
        assert slow.is_error and "[invalid] query cancelled after 3 s" in slow.content[0].text


def test_cli_query(profile, fresh_db, world) -> None:
    base = [sys.executable, "-m", "mcp_memory", "--dsn", fresh_db, "query"]
    done = subprocess.run([*base, "SELECT project_id, title FROM sessions ORDER BY 1", "--json", "--limit", "1"],
                          env=profile, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["rows"] == [["A", "in A"]] and doc["truncated"] is True
    text = subprocess.run([*base, "SELECT 'a\tb' AS x, 2 AS y"], env=profile, capture_output=True, text=True, timeout=120)
    assert text.stdout == "x\ty\na\\tb\t2\n" and "(1 row;" in text.stderr
    bad = subprocess.run([*base, "DELETE FROM sessions"], env=profile, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.startswith("mcp-memory: [invalid] sql must be a read-only query")


def test_the_timeout_is_configured_and_kept_under_the_call_timeout() -> None:
    assert query.timeout_seconds({}, 8.0) == 3.0
    assert query.timeout_seconds({"query": {"statement_timeout": 1.5}}, 8.0) == 1.5
    assert query.timeout_seconds({"query": {"statement_timeout": 30}}, 8.0) == 7.0
    assert query.timeout_seconds({"query": {"statement_timeout": 30}}, 0) == 30.0
    with pytest.raises(Invalid, match=r"\[query\] statement_timeout"):
        query.timeout_seconds({"query": {"statement_timeout": "soon"}}, 8.0)


def test_read_only_and_all_project_tokens(world, make_token, settings) -> None:
    for projects, flags, expected in ((["A"], {"read_only": True}, [["A"]]), (["*"], {}, [["A"], ["B"]]),
                                      (["C"], {}, [])):
        svc = token_service(settings, make_token("qscope", projects, **flags))
        try:
            assert svc.query_memory("SELECT DISTINCT project_id FROM messages ORDER BY 1").rows == expected, projects
        finally:
            svc.db.close()


def test_without_the_reader_function_the_tool_says_what_to_do(world, service) -> None:
    with psycopg.connect(service.settings.dsn, autocommit=True) as admin:
        admin.execute("DROP FUNCTION mm_read.query(text, integer, integer, integer)")
    with pytest.raises(Unavailable, match=r"mcp_memory_reader .* db migrate"):
        service.query_memory("SELECT 1")


@pytest.mark.parametrize(("sql", "rule"), [
    ("SELECT rolname FROM pg_roles", "not pg_roles"),
    ("SELECT datname FROM pg_catalog.pg_database", "not pg_catalog.pg_database"),
    ("SELECT reltuples FROM pg_class WHERE relname = 'messages'", "not pg_class"),
    ("SELECT (SELECT count(*) FROM information_schema.tables)", "not information_schema.tables"),
    ("SELECT lo_from_bytea(0, 'kept')", "not lo_from_bytea()"),
    ("SELECT lo_create(0)", "not lo_create()"),
    ("SELECT current_setting('server_version')", "not current_setting()"),
    ("SELECT pg_database_size(current_database())", "not pg_database_size()"),
    ("SELECT 'pg_authid'::regclass", "may not cast to regclass"),
    ("SELECT 'postgres'::regrole::oid", "may not cast to regrole"),
    ("SELECT * FROM messages FOR UPDATE", "no FOR UPDATE"),
    ("WITH pg_roles AS (SELECT 1) SELECT * FROM (SELECT 1) a, pg_roles", "WITH query pg_"),
    ("SELECT pg_sleep(10)", "not pg_sleep()"),
    ("SELECT count(*) FROM messages" + " JOIN" * 0 + "; SELECT 2", "one statement"),
    ("SELECT ((((1)))) + ", "does not parse"),
])
def test_catalogs_large_objects_and_other_functions_are_refused_before_sending(token_a, sql, rule) -> None:
    """A role can always read the system catalogs and call PUBLIC's built-ins (role and database
    names, row counts, large objects that outlive the query): query_memory holds the statement to
    the views and the ordinary functions, on PostgreSQL's own parse tree."""
    refused(token_a, sql, rule)


def test_ordinary_questions_still_parse_and_run(token_a, world) -> None:
    for sql in ("WITH recent AS (SELECT session_id FROM sessions ORDER BY created_at DESC LIMIT 5) "
                "SELECT count(*) FROM messages m JOIN recent r USING (session_id)",
                "SELECT lower(text), length(text), date_trunc('day', created_at), extract(epoch FROM created_at) "
                "FROM mm_read.messages WHERE text ILIKE '%hello%' ORDER BY seq",
                "SELECT role, count(*) FILTER (WHERE text IS NOT NULL), row_number() OVER (ORDER BY role) FROM messages "
                "GROUP BY role", "VALUES (1), (2)", "TABLE sessions",
                "SELECT jsonb_array_length(coalesce(tool_calls::jsonb, '[]'::jsonb)) FROM messages"):
        token_a.query_memory(sql)


def test_a_private_decision_stays_its_authors_for_an_all_projects_token(world, make_token, settings, service) -> None:
    b = str(world["B"])
    service.record_decision(b, "db", "the owner's private choice", visibility="private")
    svc = token_service(settings, make_token("qall", ["*"]))
    try:
        mine = svc.record_decision(b, "api", "the all-projects token's own private choice",
                                   visibility="private").decision_id
        seen = svc.query_memory("SELECT decision_id FROM decisions WHERE visibility = 'private'").rows
        assert seen == [[mine]]
    finally:
        svc.db.close()
    assert service.query_memory("SELECT count(*) FROM decisions WHERE visibility = 'private'").rows == [[2]]


def test_one_token_cannot_take_the_pool_with_parallel_queries(token_a) -> None:
    """At most query.PER_CALLER queries of one caller run at once; the rest are told to retry."""
    import concurrent.futures

    slow = "SELECT count(*) FROM generate_series(1, 1000000000000)"

    def ask() -> str:
        try:
            token_a.query_memory(slow)
        except Unavailable as exc:
            return "busy: " + str(exc)
        except Invalid as exc:
            return "cut: " + str(exc)
        return "done"

    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(lambda _: ask(), range(6)))
    busy = [a for a in answers if a.startswith("busy")]
    assert len(busy) == 6 - query.PER_CALLER, answers
    assert all("already running" in a for a in busy)
