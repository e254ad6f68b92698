"""A raw-SQL attacker holding a project-A token (README, One central PostgreSQL for every host): every write of the token roles goes
through the database's functions (migration 0007), which refuse what would break an invariant of
project B — or of A itself. Each test ends by checking that B still works."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from security_support import connect_as, token_service

from mcp_memory.core.messages import payload_digest
from mcp_memory.core.service import Service

pytest_plugins = ["security_support"]

MSG = {"role": "user", "content": "hello"}
DENIED = (psycopg.errors.InsufficientPrivilege, psycopg.errors.RaiseException)


@pytest.fixture
def world(service: Service) -> dict[str, object]:
    """Projects A and B, each with a session of two messages, a snapshot and a team decision."""
    ids: dict[str, object] = {}
    for project in ("A", "B"):
        session = service.create_session(project, {"title": f"in {project}"})
        service.append_messages(session.session_id, [MSG, {"role": "assistant", "content": "hi"}])
        ids[project] = session.session_id
        ids[f"snap_{project}"] = service.create_snapshot(session.session_id, "s").snapshot_id
        ids[f"dec_{project}"] = service.record_decision(session.session_id, "db", f"use postgres in {project}").decision_id
    return ids


def refused(conn: psycopg.Connection, statement: str, params: tuple = ()) -> str:
    """Run `statement`, expect a refusal, return its message."""
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(statement, params)
    assert caught.value.sqlstate in {"42501", "MM403", "MM404", "MM400", "MM409"}, caught.value
    return caught.value.diag.message_primary or ""


def b_still_works(service: Service, world: dict[str, object]) -> None:
    """B appends at its next seq and reads only its own history."""
    result = service.append_message(str(world["B"]), {"role": "user", "content": "B goes on"})
    assert result.seq == 3
    assert [m.content for m in service.read_session(str(world["B"])).messages] == ["hello", "hi", "B goes on"]


def test_messages_into_another_projects_session_are_refused(world, make_token, service) -> None:
    with connect_as(make_token("a", ["A"]), autocommit=True) as conn:
        refused(conn, "INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, "
                      "created_at) VALUES (%s, 3, 'A', 'x', 'user', '{\"content\": \"injected\"}', '\\x00', now())",
                (world["B"],))
        message = refused(conn, "SELECT * FROM mm_append(%s, ARRAY['x'], ARRAY['user'], "
                                "ARRAY['{\"role\": \"user\", \"content\": \"injected\"}'], NULL, NULL)", (world["B"],))
        assert "does not exist" in message
    b_still_works(service, world)


@pytest.mark.parametrize("statement", [
    "INSERT INTO session_context (session_id, key, revision, project_id, value) VALUES (%(B)s, 'k', 1, 'A', '1')",
    "INSERT INTO decisions (session_id, decision_id, project_id, decision_type, summary) "
    "VALUES (%(B)s, 'dec_00000000000000000000000000000001', 'A', 't', 's')",
    "INSERT INTO snapshots (session_id, project_id, up_to_seq) VALUES (%(B)s, 'A', 2)",
    "INSERT INTO message_search (session_id, seq, project_id, role, created_at, doc_len, tsv) "
    "VALUES (%(B)s, 1, 'A', 'user', now(), 1, 'x')",
    "INSERT INTO sessions (session_id, project_id, parent_session_id, fork_seq) "
    "VALUES ('ses_00000000-0000-4000-8000-00000000000a', 'A', %(B)s, 2)",
    "INSERT INTO export_jobs (snapshot_id, session_id, project_id) VALUES (%(snap_B)s, %(B)s, 'A')",
    "SELECT mm_set_context(%(B)s, 'k', '1')",
    "SELECT mm_record_decision(%(B)s, 'dec_00000000000000000000000000000002', NULL, 't', 's', 'accepted', NULL, "
    "'[]', NULL, '{}', 'team', '')",
    "SELECT mm_snapshot(%(B)s, 'mine now', '{}')",
    "SELECT mm_index_messages(%(B)s, ARRAY[1]::bigint[], ARRAY[1], ARRAY['x'], ARRAY['x'], ARRAY[1]::bigint[], "
    "0::smallint, 1)",
    "SELECT mm_fork(%(snap_B)s, 'ses_00000000-0000-4000-8000-00000000000b', NULL, NULL, '{}')",
    "SELECT mm_update_session_meta(%(B)s, '{\"title\": \"x\"}', '{}', true, 'x', false, NULL)",
    "SELECT mm_forget_session_index(%(B)s, 0::smallint)",
    "SELECT mm_store_embeddings(%(B)s, 'use-multilingual-v3', '{}', '{}', '{}', 2)",
])
def test_rows_on_another_projects_session_are_refused(world, make_token, service, statement) -> None:
    with connect_as(make_token("a", ["A"]), autocommit=True) as conn:
        refused(conn, statement, world)
    b_still_works(service, world)


@pytest.mark.parametrize("statement", [
    "UPDATE snapshots SET up_to_seq = 99",
    "UPDATE messages SET payload = '{\"content\": \"rewritten\"}'",
    "DELETE FROM messages",
    "UPDATE decisions SET summary = 'rewritten'",
    "DELETE FROM decisions",
    "UPDATE session_context SET value = '2'",
    "UPDATE search_progress SET indexed_seq = 0",
    "DELETE FROM message_search",
    "UPDATE search_term_stats SET df = 0",
    "INSERT INTO synonyms (term, group_id) VALUES ('db', 1)",
    "INSERT INTO embedding_models (model, dim) VALUES ('evil', 3)",
    "UPDATE embedding_models SET dim = 3",
    "INSERT INTO agents (name) VALUES ('evil')",
    "SELECT mm_embedding_index('use-multilingual-v3', 3)",
    "SELECT nextval('synonym_groups')",
])
def test_direct_writes_are_refused_even_in_the_own_project(world, make_token, service, statement) -> None:
    with connect_as(make_token("a", ["A"]), autocommit=True) as conn:
        refused(conn, statement)
    b_still_works(service, world)


def test_the_database_computes_the_payload_hash(world, make_token, service) -> None:
    """A token's hash is ignored: the stored one always matches the payload (canonical JSON)."""
    payload = {"role": "user", "content": "ünïcødé \"quoted\" \\ \n\t\u0001 😀", "metadata": {
        "z": [1, 2.5, 1e-07, 1e20, -0.5, True, None, {"b": 1, "a": "x", "é": 2, "aa": 3, "B": 4}],
        "a": {"": "empty key"}}}
    with connect_as(make_token("a", ["A"]), autocommit=True) as conn:
        seq, duplicate = conn.execute(
            "SELECT * FROM mm_append(%s, ARRAY['h1'], ARRAY['user'], ARRAY[%s], ARRAY['\\xdeadbeef'::bytea], NULL)",
            (world["A"], json.dumps(payload))).fetchone()
        assert (seq, duplicate) == (3, False)
        # the same append_id with another payload is a conflict, with the same one a duplicate
        assert "different payload" in refused(conn, "SELECT * FROM mm_append(%s, ARRAY['h1'], ARRAY['user'], "
                                                    "ARRAY['{\"role\": \"user\"}'], NULL, NULL)", (world["A"],))
        assert conn.execute("SELECT duplicate FROM mm_append(%s, ARRAY['h1'], ARRAY['user'], ARRAY[%s], NULL, NULL)",
                            (world["A"], json.dumps(payload, sort_keys=True))).fetchone() == (True,)
    with psycopg.connect(service.db.dsn()) as conn:
        stored, digest = conn.execute("SELECT payload, payload_hash FROM messages WHERE session_id = %s AND seq = 3",
                                      (world["A"],)).fetchone()
    assert bytes(digest) == payload_digest(stored)


def test_seq_and_lineage_come_from_the_database(world, make_token, service) -> None:
    with connect_as(make_token("a", ["A"]), autocommit=True) as conn:
        seqs = conn.execute("SELECT seq FROM mm_append(%s, ARRAY['p', 'q', 'p'], ARRAY['user', 'user', 'user'], "
                            "ARRAY['{\"content\": \"p\"}', '{\"content\": \"q\"}', '{\"content\": \"p\"}'], NULL, NULL)",
                            (world["A"],)).fetchall()
        assert [s for (s,) in seqs] == [3, 4, 3]
        child = conn.execute("SELECT session_id, parent_session_id, fork_seq, project_id FROM "
                             "mm_fork(%s, 'ses_00000000-0000-4000-8000-0000000000c1', NULL, NULL, '{}')",
                             (world["snap_A"],)).fetchone()
        assert child[1:] == (world["A"], 2, "A")
        written_by = conn.execute("SELECT DISTINCT written_by FROM messages WHERE session_id = %s AND seq > 2",
                                  (world["A"],)).fetchall()
        assert written_by == [(conn.info.user,)]


def test_private_decisions_change_only_by_their_author(world, make_token, service, settings) -> None:
    author, teammate = make_token("au", ["A"]), make_token("tm", ["A"])
    svc = token_service(settings, author)
    try:
        private = svc.record_decision(str(world["A"]), "secret", "only mine", visibility="private")
    finally:
        svc.db.close()
    with connect_as(teammate, autocommit=True) as conn:
        assert "does not exist" in refused(
            conn, "SELECT mm_update_decision(%s, 1, 'rejected', 'taken over', NULL, '[]', '{}', '')",
            (private.decision_id,))
        assert "does not exist" in refused(
            conn, "SELECT mm_record_decision(%s, 'dec_00000000000000000000000000000003', NULL, 't', 's', 'accepted', "
                  "NULL, '[]', %s, '{}', 'team', '')", (world["A"], private.decision_id))
        # a team decision: the versioned update only, and a stale version is a conflict
        assert conn.execute("SELECT mm_update_decision(%s, 1, 'rejected', 'changed', NULL, '[]', '{}', '')",
                            (world["dec_A"],)).fetchone() == (2,)
        assert "version 2, not 1" in refused(
            conn, "SELECT mm_update_decision(%s, 1, 'accepted', 'again', NULL, '[]', '{}', '')", (world["dec_A"],))
    with connect_as(author, autocommit=True) as conn:
        assert conn.execute("SELECT mm_update_decision(%s, 1, 'rejected', 'changed my mind', NULL, '[]', '{}', '')",
                            (private.decision_id,)).fetchone() == (2,)
    b_still_works(service, world)


def test_read_only_tokens_and_group_roles_write_nothing(world, make_token, service) -> None:
    reader, writer = make_token("ro", ["A"], read_only=True), make_token("a", ["A"])
    with connect_as(reader, autocommit=True) as conn:
        assert "read-only" in refused(conn, "SELECT * FROM mm_append(%s, ARRAY['r'], ARRAY['user'], "
                                            "ARRAY['{}'], NULL, NULL)", (world["A"],))
    with connect_as(writer, autocommit=True) as conn:
        conn.execute("SET ROLE mcp_memory_rw")  # a member may take its group role: it has no projects
        assert "does not exist" in refused(conn, "SELECT * FROM mm_append(%s, ARRAY['r'], ARRAY['user'], "
                                                   "ARRAY['{}'], NULL, NULL)", (world["A"],))
    b_still_works(service, world)


def test_shared_tables_are_the_owners(world, make_token, service) -> None:
    with connect_as(make_token("a", ["A"]), autocommit=True) as conn:
        # the default model is registered with its dimension: a wrong one cannot take its name
        assert conn.execute("SELECT mm_register_embedding_model('use-multilingual-v3', 3)").fetchone() == (512,)
        assert conn.execute("SELECT dim FROM embedding_models WHERE model = 'use-multilingual-v3'").fetchone() == (512,)
    b_still_works(service, world)


def test_a_session_set_role_by_the_server_writes_as_that_role(world, make_token, service) -> None:
    """A shared pool that runs SET LOCAL ROLE per transaction writes as the token, with its limits."""
    token = make_token("pooled", ["A"])
    with psycopg.connect(service.db.dsn()) as conn:
        role = psycopg.sql.Identifier(token.role)
        with conn.transaction():
            conn.execute(psycopg.sql.SQL("SET LOCAL ROLE {}").format(role))
            conn.execute("SELECT * FROM mm_append(%s, ARRAY['pooled'], ARRAY['user'], ARRAY['{}'], NULL, NULL)",
                         (world["A"],))
        with pytest.raises(psycopg.Error, match="does not exist"), conn.transaction():
            conn.execute(psycopg.sql.SQL("SET LOCAL ROLE {}").format(role))
            conn.execute("SELECT * FROM mm_append(%s, ARRAY['pooled'], ARRAY['user'], ARRAY['{}'], NULL, NULL)",
                         (world["B"],))
        who = conn.execute("SELECT written_by FROM messages WHERE append_id = 'pooled'").fetchall()
    assert who == [(token.role,)]
    b_still_works(service, world)


def test_a_schema_6_database_keeps_its_rows_and_tokens(empty_db, password_server, admin_dsn, settings) -> None:
    """Upgraded from schema 6: every row stays, the token made before the upgrade still reads,
    and now writes through the functions (its direct INSERT, allowed before, is refused)."""
    from dataclasses import replace

    from security_support import ROLE_PREFIX

    from mcp_memory.security import tokens
    from mcp_memory.store import migrate
    from mcp_memory.store.security_store import SecurityStore

    role = f"{ROLE_PREFIX}old_{uuid.uuid4().hex[:8]}"
    token = tokens.new_token(role)
    sid = "ses_00000000-0000-4000-8000-0000000000d1"
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute(migrate._BOOTSTRAP)
        for m in migrate.available():
            if m.version > 6:
                break
            with conn.transaction():
                conn.execute(m.sql)
                conn.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                             (m.version, m.name, m.checksum))
        with conn.transaction():
            SecurityStore(conn).create_role(role, token=token, groups=[tokens.GROUP_RW], read_only=False,
                                            archiver=False, projects=["old"], token_sha256=tokens.token_digest(token))
    created = tokens.CreatedToken(name=role, role=role, token=token, dsn=tokens.role_dsn(empty_db, role),
                                  projects=["old"], read_only=False, archiver=False)
    try:
        with connect_as(created, autocommit=True) as conn:  # schema 6: the token wrote directly
            conn.execute("INSERT INTO sessions (session_id, project_id, last_seq) VALUES (%s, 'old', 1)", (sid,))
            conn.execute("INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, "
                         "created_at) VALUES (%s, 1, 'old', 'a1', 'user', %s, %s, now())",
                         (sid, json.dumps(MSG), payload_digest(MSG)))
        assert [m.version for m in migrate.migrate(empty_db)] == [m.version for m in migrate.available() if m.version > 6]
        svc = token_service(replace(settings, dsn=empty_db), created)
        try:
            assert [m.content for m in svc.read_session(sid).messages] == ["hello"]
            assert svc.append_message(sid, {"role": "assistant", "content": "still here"}).seq == 2
            assert svc.search_messages("still here", project_id="old").matches
        finally:
            svc.db.close()
        with connect_as(created, autocommit=True) as conn:
            refused(conn, "INSERT INTO sessions (session_id, project_id) VALUES "
                          "('ses_00000000-0000-4000-8000-0000000000d2', 'old')")
            assert conn.execute("SELECT written_by FROM messages ORDER BY seq").fetchall() == [(role,), (role,)]
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            conn.execute(psycopg.sql.SQL("DROP OWNED BY {} CASCADE").format(psycopg.sql.Identifier(role)))
            conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(role)))


def test_an_archiver_token_moves_the_queue_only_as_the_lock_holder(world, make_token, service) -> None:
    """The archiver token writes no table; its queue functions need the single-writer lock on the
    calling connection, and see only the jobs of its projects."""
    archiver = make_token("arch", ["A"], archiver=True)
    with connect_as(archiver, autocommit=True) as conn:
        refused(conn, "UPDATE export_jobs SET status = 'done'")
        refused(conn, "INSERT INTO export_jobs (snapshot_id, session_id, project_id) VALUES (%s, %s, 'A')",
                (world["snap_B"], world["B"]))
        assert "archiver lease" in refused(conn, "SELECT * FROM mm_archive_claim('w:1', 30, 10, NULL)")
        assert conn.execute("SELECT mm_archive_acquire('w:1', 600)").fetchone() == (True,)
        claimed = conn.execute("SELECT snapshot_id FROM mm_archive_claim('w:1', 30, 10, NULL)").fetchall()
        assert claimed == [(world["snap_A"],)]  # B's job is not its project's
        assert conn.execute("SELECT mm_archive_mark_done(ARRAY[(SELECT job_id FROM export_jobs)])").fetchone() == (1,)
    with connect_as(make_token("a", ["A"]), autocommit=True) as conn:  # a writer is no archiver
        refused(conn, "SELECT mm_archive_acquire('w:2', 600)")  # no EXECUTE
        refused(conn, "SELECT * FROM mm_archive_claim('w:1', 30, 10, NULL)")
    b_still_works(service, world)
