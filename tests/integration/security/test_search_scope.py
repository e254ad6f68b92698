# ruff: noqa: F811  (tests take the imported fixture `world` by name)
"""Search's candidate scan runs outside row-level security (mm_search_candidates, migration 0030,
so that a token's match can use the GIN index) and applies the policy's rule itself: for every kind
of caller it must give exactly the rows a direct SELECT under RLS gives, whatever the caller sets
in its session. Each caller here runs raw SQL as a token holder would."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import psycopg.sql
import pytest
from security_support import connect_as, token_service
from test_write_api import world  # noqa: F401 (the fixture `world`: projects A and B)

pytest_plugins = ["security_support"]

# the candidate scan for the word every message of the world holds ('hello'), no filter but one
CALL = ("SELECT session_id, seq FROM mm_search_candidates('hello'::tsquery, '{hello}', '{1}', 5, 1.2, 0.75, 1000,"
        " %(newest)s, true, %(project)s, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
DIRECT = "SELECT session_id, seq FROM message_search WHERE tsv @@ 'hello'::tsquery"


def both(conn: psycopg.Connection, project: str | None = None) -> tuple[set, set, set]:
    """(rows of the candidate scan by rank, by newest, rows a direct SELECT reads) for `project`."""
    rank = set(conn.execute(CALL, {"newest": False, "project": project}).fetchall())
    newest = set(conn.execute(CALL, {"newest": True, "project": project}).fetchall())
    direct = set(conn.execute(DIRECT + (" AND project_id = %(p)s" if project else ""), {"p": project}).fetchall())
    return rank, newest, direct


@pytest.fixture
def indexed(world, service) -> Iterator[dict[str, object]]:
    for project in ("A", "B"):
        service.indexer.index_session(str(world[project]))
    yield world


def rows_of(conn: psycopg.Connection, project: str) -> set:
    """The rows of `project` that hold the word (the owner reads every row)."""
    return set(conn.execute(DIRECT + " AND project_id = %s", (project,)).fetchall())


@pytest.mark.parametrize(("projects", "read_only", "sees"), [
    (["A"], False, {"A"}), (["B"], True, {"B"}), (["*"], True, {"A", "B"}), (["C"], False, set()),
])
def test_each_token_gets_what_a_direct_select_gives(indexed, make_token, fresh_db, projects, read_only, sees) -> None:
    with psycopg.connect(fresh_db, autocommit=True) as owner:
        expected = set().union(*(rows_of(owner, p) for p in sees)) if sees else set()
    token = make_token("scan", projects, read_only=read_only)
    with connect_as(token, autocommit=True) as conn:
        for project in (None, "A", "B"):
            rank, newest, direct = both(conn, project)
            assert rank == newest == direct, (project, rank, newest, direct)
        assert both(conn)[0] == expected
        assert len(expected) == len(sees)  # one 'hello' in each project's session


def test_the_owner_gets_every_row(indexed, fresh_db) -> None:
    with psycopg.connect(fresh_db, autocommit=True) as owner:
        rank, newest, direct = both(owner)
        assert rank == newest == direct == rows_of(owner, "A") | rows_of(owner, "B")


@pytest.mark.parametrize("attempt", [
    "SET mm.gateway_role = '{other}'",  # a forged gateway claim without the proof
    "SET mm.gateway_role = '{other}'; SET mm.gateway_proof = 'x'",
    "SET ROLE mcp_memory_rw",  # a group role the token belongs to: no token, no project
    "SET search_path = pg_temp, public",
])
def test_what_a_token_sets_in_its_session_widens_nothing(indexed, make_token, attempt) -> None:
    a = make_token("a", ["A"])
    other = make_token("all", ["*"])
    with connect_as(a, autocommit=True) as conn:
        for statement in attempt.format(other=other.role).split("; "):
            conn.execute(statement)
        rank, newest, direct = both(conn)
        assert rank == newest == direct
        assert not {sid for sid, _ in rank} - {str(indexed["A"])}


def test_a_stranger_role_may_not_call_it(indexed, fresh_db, admin_dsn) -> None:
    """A login that is no token and holds no group: no execute right (it could not read message_search either)."""
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS mmtest_stranger")
        admin.execute("CREATE ROLE mmtest_stranger")
    try:
        with psycopg.connect(fresh_db, autocommit=True) as owner:
            owner.execute("SET ROLE mmtest_stranger")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                owner.execute(CALL, {"newest": False, "project": None})
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute("DROP ROLE mmtest_stranger")


def test_search_as_a_token_finds_only_its_projects(indexed, make_token, settings) -> None:
    """The whole search path as a host runs it."""
    service = token_service(settings, make_token("host", ["A"], read_only=True))
    try:
        hits = service.search_messages("hello", mode="fts").matches
        assert hits and {h.session_id for h in hits} == {str(indexed["A"])}
        assert not service.search_messages("hello", project_id="B", mode="fts").matches
    finally:
        service.db.close()


def test_a_tokens_search_reads_the_gin_index_on_the_month_partitions(indexed, make_token, fresh_db, admin_dsn) -> None:
    """The plan a token's search runs, as auto_explain logs it inside mm_search_candidates: the match is
    an index condition on the month partitions' GIN indexes, with the caller's scope beside it. (Before
    migration 0030 the same search as a token was a scan of every row with the match as a filter.)"""
    token = make_token("plan", ["A"], read_only=True)
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        try:
            admin.execute("LOAD 'auto_explain'")
        except psycopg.Error as exc:  # the embedded server's build has no auto_explain
            pytest.skip(f"auto_explain is not available here: {exc}")
        # the token can neither LOAD a library nor set its parameters: the superuser sets them for the role
        for setting in ("session_preload_libraries = 'auto_explain'", "auto_explain.log_nested_statements = on",
                        "auto_explain.log_min_duration = 0", "auto_explain.log_format = json",
                        "auto_explain.log_level = notice"):
            admin.execute(psycopg.sql.SQL("ALTER ROLE {} SET " + setting).format(psycopg.sql.Identifier(token.role)))
    notices: list[str] = []
    with connect_as(token, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SET enable_seqscan = off")  # tiny tables: show what the indexes allow
        rows = conn.execute(CALL, {"newest": False, "project": None}).fetchall()
    assert rows and {sid for sid, _ in rows} == {str(indexed["A"])}
    plans = [json.loads(n[n.index("{"):]) for n in notices if "{" in n and "message_search" in n]
    inner = [p for p in plans if "WITH candidates" in p.get("Query Text", "")]
    assert inner, notices
    found = [node for node in walk(inner[0]["Plan"]) if node.get("Relation Name", "").startswith("message_search")]
    assert found, inner[0]
    # the planner chooses per partition (a tiny one may take the project index); under RLS the match
    # could be an index condition in none of them
    assert any("tsv @@" in node.get("Recheck Cond", "") for node in found), found
    assert all("project_id" in node.get("Filter", "") + node.get("Recheck Cond", "") for node in found), found
    assert len(found) >= 2  # month partitions


def walk(plan: dict) -> Iterator[dict]:
    yield plan
    for child in plan.get("Plans", []):
        yield from walk(child)
