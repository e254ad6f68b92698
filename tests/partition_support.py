"""Sessions of a past month, for the partition tests (test_partitions, test_partition_rls,
test_cold_months): written as the owner writes a restored session, so that its rows land in that
month's partition."""

from __future__ import annotations

import uuid
from datetime import date

import psycopg


def old_session(dsn: str, project: str, month: date) -> str:
    """A session that started on the 15th of `month`, with its search progress row."""
    sid = f"ses_{uuid.uuid4()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO sessions (session_id, project_id, created_at) VALUES (%s, %s, %s)",
                     (sid, project, f"{month:%Y-%m}-15 12:00:00+00"))
        conn.execute("INSERT INTO search_progress (session_id, project_id, indexed_seq, stored_seq) "
                     "VALUES (%s, %s, 0, 0)", (sid, project))
    return sid
