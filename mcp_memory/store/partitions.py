"""Month partitions of the tables that grow (migration 0021): create the months ahead, list them,
retire a month whole. The owner's work (DDL): the functions are not granted to any token."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

import psycopg

from ..errors import Invalid
from .sql import first_row, scalar

MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
RETIRE_LOCK_TIMEOUT = "5s"  # DETACH waits for the parent's lock; a queue behind it would stall appends


@dataclass(frozen=True)
class Partition:
    table: str
    name: str
    bound: str
    rows: int  # the planner's estimate (pg_class.reltuples), -1 before the first ANALYZE


def parse_month(text: str) -> date:
    """`YYYY-MM` → the first day of that month; Invalid names the field and the rule."""
    found = MONTH.match(text or "")
    if not found:
        raise Invalid(f"month must be YYYY-MM (e.g. 2026-01), not {text!r}")
    return date(int(found.group(1)), int(found.group(2)), 1)


def ensure(conn: psycopg.Connection, months_ahead: int) -> list[str]:
    """Partitions for this month and `months_ahead` after it, and for months found in a default
    partition (their rows move in); the names created."""
    if not 0 <= months_ahead <= 120:
        raise Invalid("months_ahead must be 0 to 120")
    made = scalar(conn, "SELECT mm_ensure_partitions(%(n)s::integer)", {"n": months_ahead}, what="mm_ensure_partitions")
    return list(made or [])


def layout(conn: psycopg.Connection) -> list[Partition]:
    rows = conn.execute(
        "SELECT p.relname, c.relname, pg_get_expr(c.relpartbound, c.oid), c.reltuples::bigint "
        "FROM unnest(mm_partitioned_tables()) AS t(name) JOIN pg_class p ON p.oid = to_regclass(t.name) "
        "JOIN pg_inherits i ON i.inhparent = p.oid JOIN pg_class c ON c.oid = i.inhrelid "
        "ORDER BY p.relname, c.relname").fetchall()
    return [Partition(*row) for row in rows]


def retire(conn: psycopg.Connection, month: date, *, drop: bool) -> dict[str, object]:
    """Detach `month` from every partitioned table (and drop it when `drop`), in one transaction.
    Plain DETACH: CONCURRENTLY is refused while a default partition exists, and the default
    partition is what keeps writes safe outside the created months; the detach itself is a catalog
    change (well under a second), bounded by a lock timeout so it never queues appends for long."""
    with conn.transaction():
        conn.execute(f"SET LOCAL lock_timeout = '{RETIRE_LOCK_TIMEOUT}'")
        row = first_row(conn.execute("SELECT part_month, sessions, messages, dropped, detached "
                                     "FROM mm_retire_month(%s, %s)", (month, drop)).fetchone(), "mm_retire_month")
    return {"month": f"{row[0]:%Y-%m}", "sessions": row[1], "messages": row[2], "dropped": row[3],
            "detached": list(row[4])}
