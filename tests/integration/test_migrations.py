"""Migrations: all applied to an empty database, result compared with the expected schema."""

from __future__ import annotations

import threading
import zlib

import psycopg
import pytest

from mcp_memory.store import migrate

EXPECTED_COLUMNS = {
    "sessions": {"session_id", "project_id", "agent_source", "title", "meta", "last_seq", "parent_session_id",
                 "fork_seq", "parent_snapshot_id", "created_by", "created_at", "updated_at", "part_month"},
    "messages": {"session_id", "seq", "project_id", "append_id", "role", "payload", "payload_hash", "created_at",
                 "received_at", "written_by", "part_month"},
    "snapshots": {"snapshot_id", "session_id", "project_id", "up_to_seq", "commit_msg", "meta", "created_by",
                  "created_at"},
    "export_jobs": {"job_id", "snapshot_id", "session_id", "project_id", "status", "attempts", "last_error",
                    "locked_by", "lease_until", "run_after", "finished_at", "created_at", "commit_sha"},
}


def _columns(conn: psycopg.Connection, table: str) -> set[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = %s",
        (table,),
    ).fetchall()
    return {r[0] for r in rows}


def test_migrate_empty_database_gives_expected_schema(empty_db: str) -> None:
    applied = migrate.migrate(empty_db)
    assert [m.version for m in applied] == [m.version for m in migrate.available()]
    assert migrate.migrate(empty_db) == []  # idempotent
    with psycopg.connect(empty_db) as conn:
        for table, columns in EXPECTED_COLUMNS.items():
            assert columns <= _columns(conn, table), table
        pk = conn.execute(
            """SELECT array_agg(a.attname ORDER BY k.ord) FROM pg_index i
               CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY k(attnum, ord)
               JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
               WHERE i.indrelid = 'messages'::regclass AND i.indisprimary"""
        ).fetchone()[0]
        assert pk == ["session_id", "seq", "part_month"]  # the partition key last (migration 0021)
        uniques = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'messages'::regclass AND contype = 'u'"
        ).fetchall()
        assert ("UNIQUE (session_id, append_id, part_month)",) in uniques
        checks = " ".join(r[0] for r in conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'messages'::regclass AND contype = 'c'"
        ))
        assert "'system'" in checks and "'tool'" in checks
        states = migrate.status(conn)
        assert all(s.applied_at is not None and s.checksum_ok for s in states)
        assert migrate.current_version(conn) == migrate.latest_version()


def test_two_concurrent_migrations_apply_each_once(empty_db: str) -> None:
    results: list[list] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(migrate.migrate(empty_db))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(len(r) for r in results) == [0, len(migrate.available())]
    with psycopg.connect(empty_db) as conn:
        count = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
    assert count == len(migrate.available())


def test_upgrade_to_0006_keeps_what_appends_indexed_and_finds_the_rest(empty_db: str, profile) -> None:
    """A database of schema 5, where appends indexed in their own transaction, upgraded: each
    session's watermark is its last indexed message, the one stored without a search row is the
    backlog that reindex (or the next search) indexes, and nothing is indexed twice."""
    from dataclasses import replace

    from mcp_memory.config import load_settings
    from mcp_memory.wiring import build

    sid = "ses_00000000-0000-0000-0000-00000000000a"
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute(migrate._BOOTSTRAP)
        for m in migrate.available():
            if m.version > 5:
                break
            with conn.transaction():
                conn.execute(m.sql)
                conn.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                             (m.version, m.name, m.checksum))
        conn.execute("INSERT INTO sessions (session_id, project_id, last_seq) VALUES (%s, 'old', 3)", (sid,))
        for seq, text in ((1, "alpha"), (2, "beta"), (3, "gamma")):
            conn.execute("INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, "
                         "created_at) VALUES (%s, %s, 'old', %s, 'user', %s, '\\x00', now())",
                         (sid, seq, f"a{seq}", f'{{"role": "user", "content": "{text}"}}'))
        shard = zlib.crc32(sid.encode()) % 8
        for seq, text in ((1, "alpha"), (2, "beta")):  # as the old append indexed them
            conn.execute("INSERT INTO message_search VALUES (%s, %s, 'old', 'user', now(), 1, %s::tsvector)",
                         (sid, seq, f"'{text}':1"))
            conn.execute("INSERT INTO search_term_stats VALUES ('old', %s, %s, 1)", (text, shard))
        conn.execute("INSERT INTO search_doc_stats VALUES ('old', %s, 2, 2)", (shard,))
    assert [m.version for m in migrate.migrate(empty_db)] == [m.version for m in migrate.available() if m.version >= 6]
    with psycopg.connect(empty_db) as conn:
        assert conn.execute("SELECT indexed_seq, stored_seq FROM search_progress WHERE session_id = %s",
                            (sid,)).fetchone() == (2, 3)
        assert not conn.execute("SELECT 1 FROM pg_constraint WHERE conname = 'messages_session_id_fkey'").fetchall()
    svc = build(replace(load_settings(dsn=empty_db, environ=profile)))
    try:
        assert svc.reindex_search() == 1
        # the turn that holds the word first (its neighbours follow at half score)
        assert svc.search_messages("gamma", project_id="old").matches[0].seq == 3
        assert svc.search_messages("alpha", project_id="old").matches[0].seq == 1
        with svc.db.transaction() as conn:  # each message indexed once, the statistics count it once
            assert conn.execute("SELECT count(*), count(DISTINCT seq) FROM message_search").fetchone() == (3, 3)
            assert conn.execute("SELECT sum(docs) FROM search_doc_stats").fetchone()[0] == 3
    finally:
        svc.db.close()


def _migrate_up_to(conn: psycopg.Connection, version: int) -> None:
    conn.execute(migrate._BOOTSTRAP)
    for m in migrate.available():
        if m.version > version:
            break
        with conn.transaction():
            conn.execute(m.sql)
            conn.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                         (m.version, m.name, m.checksum))


def test_upgrade_to_0013_drops_the_window_vectors_and_keeps_the_message_vectors(empty_db: str) -> None:
    with psycopg.connect(empty_db, autocommit=True) as conn:
        _migrate_up_to(conn, 12)
        if conn.execute("SELECT to_regclass('message_embeddings') IS NULL").fetchone()[0]:
            pytest.skip("pgvector is not installed on this PostgreSQL server")
        conn.execute("INSERT INTO embedding_models (model, dim) VALUES ('m3', 3)")
        for kind in ("message", "window"):
            conn.execute("INSERT INTO message_embeddings (session_id, seq, model, kind, project_id, embedding) "
                         "VALUES ('ses_x', 1, 'm3', %s, 'p', '[1,0,0]')", (kind,))
    assert [m.version for m in migrate.migrate(empty_db)] == [m.version for m in migrate.available() if m.version >= 13]
    with psycopg.connect(empty_db) as conn:
        assert conn.execute("SELECT kind FROM message_embeddings").fetchall() == [("message",)]


# The statements of every migration up to schema 12, as they were first applied. A database
# migrated before comments stopped counting recorded full-text digests; `Migration.matches`
# accepts those only because the statements below are unchanged, which this test holds to.
STATEMENTS_AT_SCHEMA_12 = {
    1: "2c16ac7898bedc7c", 3: "71b1425ddd587da9", 4: "b31465435e1e9bbf", 5: "a5bad7221f5bd958",
    6: "0d05974ebd79bf97", 7: "826344c9ffca0814", 8: "e23a5d9ff29b6654", 10: "1c1b693e71763a40",
    11: "7b5bb4c7339363ea", 12: "da71a4e9c3ab3560",
}


def test_applied_migrations_keep_their_statements() -> None:
    current = {m.version: m.checksum for m in migrate.available() if m.version in STATEMENTS_AT_SCHEMA_12}
    assert current == STATEMENTS_AT_SCHEMA_12


def test_a_reworded_comment_is_not_a_changed_migration() -> None:
    m = migrate.available()[0]
    reworded = migrate.Migration(m.version, m.name, "-- another wording\n\n" + m.sql.replace("\n", "  \n"))
    assert reworded.checksum == m.checksum
    changed = migrate.Migration(m.version, m.name, m.sql + "\nSELECT 1;\n")
    assert changed.checksum != m.checksum
    assert not changed.matches(m.checksum) and changed.matches(changed.checksum)


def test_status_accepts_the_full_text_digest_recorded_by_earlier_versions(empty_db: str) -> None:
    migrate.migrate(empty_db)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute("UPDATE schema_migrations SET checksum = %s WHERE version = 1",
                     (migrate._FULL_TEXT_CHECKSUMS[1][0],))
        conn.execute("UPDATE schema_migrations SET checksum = 'ffffffffffffffff' WHERE version = 3")
        states = {s.version: s.checksum_ok for s in migrate.status(conn)}
    assert states[1] is True and states[3] is False
    assert all(ok for v, ok in states.items() if v != 3)
