"""Row-level security over month partitions (migration 0021), as a token's raw SQL: the parent table
hides other projects' rows in every partition, a partition cannot be read around the parent, and
the partition upkeep (DDL) is the owner's alone."""

from __future__ import annotations

from datetime import date

import psycopg
import pytest
from partition_support import old_session
from security_support import connect_as

from mcp_memory.store import partitions

pytest_plugins = ["security_support"]


def test_a_token_sees_its_projects_rows_in_every_partition_and_no_partition_directly(
        service, fresh_db: str, make_token) -> None:
    months = (date(2025, 1, 1), date(2025, 2, 1), date.today().replace(day=1))
    for month in months:
        for project in ("A", "B"):
            sid = old_session(fresh_db, project, month)
            service.append_messages(sid, [{"role": "user", "content": f"{project} in {month:%Y-%m}"}])
    service.reindex_search()
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        partitions.ensure(conn, 1)
        parts = [p.name for p in partitions.layout(conn)]
        assert conn.execute("SELECT count(DISTINCT tableoid) FROM messages").fetchone() == (3,)
    token = make_token("parts", ["A"])
    with connect_as(token, autocommit=True) as conn:
        rows = conn.execute("SELECT project_id, part_month, count(*) FROM messages GROUP BY 1, 2 ORDER BY 2").fetchall()
        assert rows == [("A", month, 1) for month in months]
        assert conn.execute("SELECT DISTINCT project_id FROM message_search").fetchall() == [("A",)]
        assert conn.execute("SELECT count(*) FROM messages WHERE part_month = '2025-01-01'").fetchone() == (1,)
        for name in parts:  # every partition, the default one too: only through the parent
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SELECT count(*) FROM {name}")
        for call in ("SELECT mm_ensure_partitions(1)", "SELECT mm_retire_month('2025-01-01', true)",
                     "SELECT mm_add_month_partition('messages', '2030-01-01')", "SELECT mm_harden_partitions()",
                     "SELECT mm_restore_month('2025-01-01')"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(call)
        assert conn.execute("SELECT part_month FROM retired_months").fetchall() == []
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT messages FROM retired_months")
        with pytest.raises(psycopg.Error):  # writing around the append function stays refused
            conn.execute("INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, "
                         "created_at, part_month) SELECT session_id, 99, 'A', 'x', 'user', '{}', '\\x00', now(), "
                         "part_month FROM sessions WHERE project_id = 'A' LIMIT 1")
