"""Row-level security, proven with raw SQL as the token roles (README, One central PostgreSQL for every host): read, write, update and
delete across projects, read-only, archiver, revoked; and the same limits through the core."""

from __future__ import annotations

import json

import psycopg
import pytest
from security_support import connect_as, token_service

from mcp_memory.core.service import Service
from mcp_memory.errors import Forbidden, NotFound
from mcp_memory.security import tokens

MSG = {"role": "user", "content": "hello"}

pytest_plugins = ["security_support"]


@pytest.fixture
def world(service: Service) -> dict[str, str]:
    """Two projects with a session, messages and a snapshot (+ export job) each, written by the owner."""
    ids = {}
    for project in ("A", "B"):
        session = service.create_session(project, {"title": f"in {project}"})
        service.append_messages(session.session_id, [MSG, {"role": "assistant", "content": "hi"}])
        service.create_snapshot(session.session_id, "s")
        ids[project] = session.session_id
    return ids


def count(conn: psycopg.Connection, table: str) -> int:
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_every_project_table_has_rls(fresh_db: str) -> None:
    with psycopg.connect(fresh_db) as conn:
        missing = conn.execute(
            """SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
               WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
                 AND a.attname IN ('project_id', 'session_id') AND NOT c.relrowsecurity
                 AND NOT c.relispartition""").fetchall()
    assert missing == []


def test_read_write_across_projects(world: dict[str, str], make_token) -> None:
    host_a = make_token("a", ["A"])
    with connect_as(host_a, autocommit=True) as conn:
        for table in ("sessions", "snapshots", "export_jobs"):
            assert count(conn, table) == 1, table
        assert count(conn, "messages") == 2
        assert conn.execute("SELECT DISTINCT project_id FROM messages").fetchall() == [("A",)]
        # writes go through the database's functions only: own project yes, other project no
        conn.execute("SELECT mm_update_session_meta(%s, '{\"k\": 1}', '{}', true, 'mine', false, NULL)",
                     (world["A"],))
        with pytest.raises(psycopg.Error, match="does not exist"):
            conn.execute("SELECT mm_update_session_meta(%s, '{}', '{}', true, 'theirs', false, NULL)", (world["B"],))
        with pytest.raises(psycopg.Error, match="may not write project B"):
            conn.execute("SELECT mm_create_session('ses_00000000-0000-4000-8000-000000000001', 'B', NULL, NULL, '{}')")
        conn.execute("SELECT mm_create_session('ses_00000000-0000-4000-8000-000000000002', 'A', NULL, NULL, '{}')")
        for statement in ("UPDATE sessions SET title = 'direct' WHERE session_id = %s",
                          "UPDATE sessions SET project_id = 'B' WHERE session_id = %s"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # even in its own project
                conn.execute(statement, (world["A"],))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO sessions (session_id, project_id) VALUES "
                         "('ses_00000000-0000-4000-8000-000000000003', 'A')")


def test_history_is_append_only_and_audit_columns_are_set_by_the_server(world: dict[str, str], make_token) -> None:
    host_a = make_token("a", ["A"])
    with connect_as(host_a, autocommit=True) as conn:
        for statement in ("DELETE FROM messages", "DELETE FROM sessions", "UPDATE messages SET payload = '{}'",
                          ("INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, "
                           "payload_hash, created_at, written_by) VALUES ('x', 9, 'A', 'x', 'user', '{}', "
                           "'\\x00', now(), 'somebody-else')")):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_read_only_token(world: dict[str, str], make_token) -> None:
    reader = make_token("ro", ["A"], read_only=True)
    with connect_as(reader, autocommit=True) as conn:
        assert count(conn, "sessions") == 1 and count(conn, "messages") == 2
        for statement in ("UPDATE sessions SET title = 'x'", ("INSERT INTO sessions (session_id, project_id) "
                          "VALUES ('ses_00000000-0000-4000-8000-000000000003', 'A')"),
                          "SELECT * FROM sessions FOR UPDATE", "DELETE FROM export_jobs"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_several_projects_and_scope_rows(world: dict[str, str], make_token) -> None:
    both = make_token("ab", ["A", "B"])
    with connect_as(both, autocommit=True) as conn:
        assert count(conn, "sessions") == 2
        rows = conn.execute("SELECT role_name FROM access_tokens").fetchall()
        assert rows == [(both.role,)]  # its own scope only
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO access_token_projects VALUES (%s, 'C')", (both.role,))


def test_archiver_reads_all_and_moves_jobs_only_through_the_queue_functions(world: dict[str, str], make_token) -> None:
    archiver = make_token("arch", None, archiver=True)
    assert archiver.projects == ["*"] and archiver.read_only
    with connect_as(archiver, autocommit=True) as conn:
        assert count(conn, "sessions") == 2 and count(conn, "messages") == 4
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE export_jobs SET status = 'done', finished_at = now()")
        assert conn.execute("SELECT mm_archive_acquire('me:1', 600)").fetchone() == (True,)
        claimed = conn.execute("SELECT job_id FROM mm_archive_claim('me:1', 30, 10, NULL)").fetchall()
        assert len(claimed) == 2
        assert conn.execute("SELECT mm_archive_mark_done(%s)", ([j for (j,) in claimed],)).fetchone() == (2,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE sessions SET title = 'x'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO snapshots (session_id, project_id, up_to_seq) VALUES (%s, 'A', 0)",
                         (world["A"],))


def test_revoked_token(world: dict[str, str], make_token, owner_db) -> None:
    host_a = make_token("gone", ["A"])
    open_conn = connect_as(host_a, autocommit=True)
    assert count(open_conn, "sessions") == 1
    ended = tokens.revoke(owner_db, host_a.role)
    assert ended == 1  # the test server's owner is a superuser: it may end the connection
    with pytest.raises(psycopg.OperationalError):
        open_conn.execute("SELECT 1")
    with pytest.raises(psycopg.OperationalError):
        connect_as(host_a)
    assert all(t.role != host_a.role for t in tokens.list_(owner_db))
    with pytest.raises(NotFound):
        tokens.revoke(owner_db, host_a.role)


def test_visibility_policy_on_a_table_like_decisions(fresh_db: str, make_token) -> None:
    """mm_enable_project_rls honours visibility private | team | public."""
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE vis_probe (id int, project_id text, visibility text, "
                     "created_by text NOT NULL DEFAULT current_user)")
        conn.execute("SELECT mm_enable_project_rls('vis_probe')")
    author, teammate, outsider = make_token("au", ["A"]), make_token("tm", ["A"]), make_token("out", ["B"])
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute("INSERT INTO vis_probe VALUES (1, 'A', 'private', %s), (2, 'A', 'team', 'x'), "
                     "(3, 'A', 'public', 'x'), (4, 'B', 'team', 'x')", (author.role,))

    def visible(created: tokens.CreatedToken) -> list[int]:
        with connect_as(created) as conn:
            return [r[0] for r in conn.execute("SELECT id FROM vis_probe ORDER BY id")]

    assert visible(author) == [1, 2, 3]
    assert visible(teammate) == [2, 3]
    assert visible(outsider) == [3, 4]


def test_session_keyed_table_follows_its_session(world: dict[str, str], fresh_db: str, make_token) -> None:
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE notes_probe (session_id text, body text)")
        conn.execute("SELECT mm_enable_session_rls('notes_probe')")
        conn.execute("INSERT INTO notes_probe VALUES (%s, 'a'), (%s, 'b')", (world["A"], world["B"]))
    host_a = make_token("a", ["A"])
    with connect_as(host_a, autocommit=True) as conn:
        assert conn.execute("SELECT body FROM notes_probe").fetchall() == [("a",)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO notes_probe VALUES (%s, 'c')", (world["B"],))


def test_decisions_table_is_covered_when_present(fresh_db: str) -> None:
    with psycopg.connect(fresh_db) as conn:
        # migration 0003 makes the table: a migrated database without it is a failure, not a skip
        assert conn.execute("SELECT to_regclass('decisions')").fetchone()[0] is not None, "no decisions table"
        columns = {r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'decisions'::regclass AND attnum > 0")}
        secured = conn.execute("SELECT relrowsecurity FROM pg_class WHERE oid = 'decisions'::regclass").fetchone()[0]
    assert {"visibility", "created_by", "project_id"} <= columns and secured


def test_core_through_a_token(world: dict[str, str], make_token, settings) -> None:
    host_a = make_token("a", ["A"])
    svc = token_service(settings, host_a)
    try:
        mine = svc.create_session("A")
        result = svc.append_message(mine.session_id, {**MSG, "append_id": "m1"})
        assert result.seq == 1
        assert [s.project_id for s in svc.list_sessions().sessions] == ["A", "A"]
        with pytest.raises(Forbidden):
            svc.create_session("B")
        for call in (lambda: svc.read_session(world["B"]), lambda: svc.append_message(world["B"], MSG),
                     lambda: svc.create_snapshot(world["B"]), lambda: svc.update_session_meta(world["B"], {"x": 1})):
            with pytest.raises(NotFound):
                call()
        snap = svc.create_snapshot(mine.session_id, "by host a")
        forked = svc.load_snapshot(snap.snapshot_id)
        assert svc.read_session(forked.session_id).messages[0].content == "hello"
    finally:
        svc.db.close()
    with psycopg.connect(settings.dsn) as conn:
        who = conn.execute("SELECT written_by FROM messages WHERE session_id = %s", (mine.session_id,)).fetchone()
    assert who[0] == host_a.role


def test_core_batch_append_through_a_token(world: dict[str, str], make_token, settings) -> None:
    svc = token_service(settings, make_token("batch", ["A"]))
    try:
        # a batch written another way than the write functions (COPY) is refused under row-level
        # security: that is a failure of the store, never a reason to skip
        seqs = svc.append_messages(world["A"], [MSG, MSG, MSG]).seqs
        assert seqs == [3, 4, 5]
    finally:
        svc.db.close()


def test_core_read_only_token_gets_forbidden(world: dict[str, str], make_token, settings) -> None:
    svc = token_service(settings, make_token("ro", ["A"], read_only=True))
    try:
        assert len(svc.read_session(world["A"]).messages) == 2
        for call in (lambda: svc.append_message(world["A"], MSG), lambda: svc.create_session("A"),
                     lambda: svc.create_snapshot(world["A"]), lambda: svc.update_session_meta(world["A"], {"x": 1})):
            with pytest.raises(Forbidden) as info:
                call()
            assert info.value.render().startswith("[forbidden]")
    finally:
        svc.db.close()


def test_token_json_shape(make_token) -> None:
    created = make_token("shape", ["A", "B"])
    assert tokens.parse_token(created.token) == created.role
    assert created.token not in created.dsn and created.role in created.dsn
    assert json.dumps({"name": created.name, "role": created.role, "token": created.token, "dsn": created.dsn})


def test_big_batches_and_their_retry_through_a_token(world: dict[str, str], make_token, settings) -> None:
    """A batch big enough for the optimistic path (no append_id look-up, COPY where allowed) under
    row-level security: inserted, and sent again, every message comes back as a duplicate."""
    svc = token_service(settings, make_token("bulk", ["A"]))
    batch = [{"append_id": f"bulk-{i}", "role": "user", "content": f"bulk message {i}"} for i in range(100)]
    try:
        first = svc.append_messages(world["A"], batch)
        assert first.seqs == list(range(3, 103)) and not any(first.duplicates)
        again = svc.append_messages(world["A"], batch)
        assert again.seqs == first.seqs and all(again.duplicates)
        mixed = svc.append_messages(world["A"], [*batch[:70], *({"append_id": f"new-{i}", "role": "user",
                                                                 "content": "x"} for i in range(30))])
        assert mixed.duplicates == [True] * 70 + [False] * 30 and mixed.seqs[70:] == list(range(103, 133))
        assert [m.seq for m in svc.search_messages("bulk message 99", project_id="A").matches][:1] == [102]
    finally:
        svc.db.close()


def test_read_only_token_searches_over_a_backlog_it_cannot_index(world: dict[str, str], make_token, service,
                                                                 settings) -> None:
    """A writer died before indexing: a read-only token's search still answers (from what is
    indexed) and says nothing is wrong; the next writer's search indexes the backlog."""
    dying = token_service(settings, make_token("dying", ["A"]))
    dying.indexer.submit = lambda session_id: None
    try:
        sid = dying.create_session("A").session_id
        dying.append_message(sid, {"role": "user", "content": "zebra crossing near the warehouse"})
    finally:
        dying.db.close()
    reader = token_service(settings, make_token("reader", ["A"], read_only=True))
    try:
        assert reader.search_messages("zebra", project_id="A").matches == []
        assert reader.search_messages("zebra", project_id="A").matches == []  # asked again: no retry storm
    finally:
        reader.db.close()
    assert [(m.session_id, m.seq) for m in service.search_messages("zebra", project_id="A").matches] == [(sid, 1)]
