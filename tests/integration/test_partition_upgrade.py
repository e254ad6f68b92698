"""Migration 0021 converts an existing database: a schema-0019 database with sessions over several
months, a fork, search rows and vectors, upgraded; every row, view and read answers as before."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import psycopg
from test_migrations import _migrate_up_to

from mcp_memory.config import load_settings
from mcp_memory.store import migrate
from mcp_memory.wiring import build

ROOT = "ses_00000000-0000-4000-8000-000000000001"
MARCH = "ses_00000000-0000-4000-8000-000000000002"
FORK = "ses_00000000-0000-4000-8000-000000000003"
DUMPS = {
    "messages": "SELECT session_id, seq, project_id, append_id, role, payload::text, payload_hash, created_at, "
                "received_at, written_by FROM messages ORDER BY 1, 2",
    "search": "SELECT session_id, seq, project_id, role, created_at, doc_len, tsv::text, echo FROM message_search "
              "ORDER BY 1, 2",
    "view": "SELECT * FROM mm_read.messages ORDER BY session_id, seq",
    "vectors": "SELECT session_id, seq, model, kind, embedding::text FROM message_embeddings ORDER BY 1, 2",
}


APPEND = "SELECT * FROM mm_append(%s, ARRAY[%s], ARRAY[%s], ARRAY[%s], NULL, ARRAY[%s::timestamptz])"


def _payload(role: str, text: str) -> str:
    return f'{{"role": "{role}", "content": "{text}"}}'


def _load(conn: psycopg.Connection) -> None:
    """What schema 0019 held, written by its append function: two months of sessions, a fork of the
    older one, search rows, vectors."""
    for sid, month, n in ((ROOT, "2025-01-20", 4), (MARCH, "2025-03-02", 2)):
        conn.execute("INSERT INTO sessions (session_id, project_id, created_at) VALUES (%s, 'up', %s)",
                     (sid, f"{month} 10:00:00+00"))
        for seq in range(1, n + 1):
            role = "user" if seq % 2 else "assistant"
            conn.execute(APPEND, (sid, f"a{seq}", role, _payload(role, f"word{seq} 分区 {sid[-1]}"),
                                  f"{month} 10:0{seq}:00+00"))
    conn.execute("INSERT INTO snapshots (session_id, project_id, up_to_seq) VALUES (%s, 'up', 3)", (ROOT,))
    conn.execute("INSERT INTO sessions (session_id, project_id, parent_session_id, fork_seq, last_seq, created_at) "
                 "VALUES (%s, 'up', %s, 3, 3, '2025-02-10 00:00:00+00')", (FORK, ROOT))
    conn.execute(APPEND, (FORK, "f4", "user", _payload("user", "forked"), "2025-02-10 00:01:00+00"))
    conn.execute("INSERT INTO search_progress (session_id, project_id, indexed_seq, stored_seq) "
                 "SELECT session_id, project_id, last_seq, last_seq FROM sessions")
    conn.execute("INSERT INTO message_search (session_id, seq, project_id, role, created_at, doc_len, tsv) "
                 "SELECT session_id, seq, project_id, role, created_at, 3, to_tsvector('simple', payload ->> 'content') "
                 "FROM messages")
    if conn.execute("SELECT to_regclass('message_embeddings') IS NOT NULL").fetchone()[0]:  # type: ignore[index]
        conn.execute("INSERT INTO embedding_models (model, dim) VALUES ('m', 3)")
        conn.execute("INSERT INTO message_embeddings (session_id, seq, model, kind, project_id, embedding) "
                     "SELECT session_id, seq, 'm', 'message', project_id, '[1,2,3]' FROM messages")


def _dump(dsn: str) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        vectors = conn.execute("SELECT to_regclass('message_embeddings') IS NOT NULL").fetchone()[0]  # type: ignore[index]
        return {name: conn.execute(query).fetchall() for name, query in DUMPS.items()
                if vectors or name != "vectors"}


def _reads(dsn: str, profile: dict[str, str]) -> dict[str, Any]:
    svc = build(replace(load_settings(dsn=dsn, environ=profile), auto_migrate=False))
    try:
        return {sid: [m.model_dump(mode="json") for m in svc.read_session(sid, view="full").messages]
                for sid in (ROOT, MARCH, FORK)}
    finally:
        svc.db.close()


def test_upgrade_from_0019_keeps_every_row_and_read(empty_db: str, profile: dict[str, str]) -> None:
    with psycopg.connect(empty_db, autocommit=True) as conn:
        _migrate_up_to(conn, 19)
        _load(conn)
    before = _dump(empty_db)
    assert [m.version for m in migrate.migrate(empty_db)] == [m.version for m in migrate.available() if m.version > 19]
    assert _dump(empty_db) == before  # rows, search rows, vectors and the read view, unchanged
    with psycopg.connect(empty_db) as conn:
        where: dict[str, list[str]] = dict(conn.execute("SELECT session_id, array_agg(DISTINCT tableoid::regclass::text) FROM messages "
                                  "GROUP BY 1").fetchall())
        assert where == {ROOT: ["messages_p2025_01"], MARCH: ["messages_p2025_03"], FORK: ["messages_p2025_02"]}
        assert conn.execute("SELECT relkind FROM pg_class WHERE oid = 'messages'::regclass").fetchone() == ("p",)
        assert conn.execute("SELECT to_regclass('messages_unpartitioned')").fetchone() == (None,)
        policies = conn.execute("SELECT polname FROM pg_policy WHERE polrelid = 'messages'::regclass "
                                "ORDER BY 1").fetchall()
        assert [p[0] for p in policies] == ["mm_delete", "mm_insert", "mm_read", "mm_update"]
        assert conn.execute("SELECT relrowsecurity FROM pg_class WHERE oid = 'messages'::regclass").fetchone() == (True,)
    reads = _reads(empty_db, profile)
    assert [m["content"] for m in reads[FORK]] == ["word1 分区 1", "word2 分区 1", "word3 分区 1", "forked"]
    assert [m["seq"] for m in reads[ROOT]] == [1, 2, 3, 4]
    with psycopg.connect(empty_db, autocommit=True) as conn:  # an append_id stored before the change
        again = conn.execute(APPEND, (MARCH, "a2", "assistant", _payload("assistant", "word2 分区 2"), None))
        assert again.fetchall() == [(2, True)]
        assert conn.execute(APPEND, (MARCH, "a3", "user", _payload("user", "new"), None)).fetchall() == [(3, False)]
        assert conn.execute("SELECT tableoid::regclass::text FROM messages WHERE session_id = %s AND seq = 3",
                            (MARCH,)).fetchone() == ("messages_p2025_03",)
    assert migrate.migrate(empty_db) == []


def test_upgrade_to_0025_gives_the_months_pg_partman_names(empty_db: str, profile: dict[str, str]) -> None:
    """Migration 0025 renames <table>_pYYYYMM to <table>_pYYYY_MM: the attached months and the kept
    tables of a retired month (which mm_restore_month then finds and attaches again)."""
    with psycopg.connect(empty_db, autocommit=True) as conn:
        _migrate_up_to(conn, 24)
        for sid, month in ((ROOT, "2025-01-20"), (MARCH, "2025-03-02"), (FORK, "2025-02-10")):
            conn.execute("INSERT INTO sessions (session_id, project_id, created_at) VALUES (%s, 'up', %s)",
                         (sid, f"{month} 10:00:00+00"))
            for seq in range(1, 5):
                conn.execute(APPEND, (sid, f"a{seq}", "user", _payload("user", f"word{seq} 分区 {sid[-1]}"), None))
        conn.execute("SELECT mm_ensure_partitions(0)")
        conn.execute("SELECT mm_retire_month('2025-01-01', false)")
        assert "messages_p202501" in conn.execute("SELECT detached FROM retired_months").fetchone()[0]  # type: ignore[index]
    before = _dump(empty_db)
    assert [m.version for m in migrate.migrate(empty_db)] == [m.version for m in migrate.available() if m.version > 24]
    assert _dump(empty_db) == before
    with psycopg.connect(empty_db, autocommit=True) as conn:
        names = {r[0] for r in conn.execute("SELECT relname FROM pg_class WHERE relname ~ '^messages_p'").fetchall()}
        assert {"messages_p2025_01", "messages_p2025_02", "messages_p2025_03"} <= names
        assert not any(n[len("messages_p"):].isdigit() for n in names)
        assert "messages_p2025_01" in conn.execute("SELECT detached FROM retired_months").fetchone()[0]  # type: ignore[index]
        assert conn.execute("SELECT part, attached FROM mm_restore_month('2025-01-01') WHERE part LIKE 'messages%'"
                            ).fetchall() == [("messages_p2025_01", True)]
    assert [m["content"] for m in _reads(empty_db, profile)[ROOT]] == [f"word{i} 分区 1" for i in range(1, 5)]
