"""Migrations: all applied to an empty database, result compared with the expected schema."""

from __future__ import annotations

import threading

import psycopg

from mcp_memory.store import migrate

EXPECTED_COLUMNS = {
    "sessions": {"session_id", "project_id", "agent_source", "title", "meta", "last_seq", "parent_session_id",
                 "fork_seq", "parent_snapshot_id", "created_by", "created_at", "updated_at"},
    "messages": {"session_id", "seq", "project_id", "append_id", "role", "payload", "payload_hash", "created_at",
                 "received_at", "written_by"},
    "snapshots": {"snapshot_id", "session_id", "project_id", "up_to_seq", "commit_msg", "meta", "created_by",
                  "created_at"},
    "export_jobs": {"job_id", "snapshot_id", "session_id", "project_id", "status", "attempts", "last_error",
                    "locked_by", "lease_until", "run_after", "finished_at", "created_at"},
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
        assert pk == ["session_id", "seq"]
        uniques = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'messages'::regclass AND contype = 'u'"
        ).fetchall()
        assert ("UNIQUE (session_id, append_id)",) in uniques
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
