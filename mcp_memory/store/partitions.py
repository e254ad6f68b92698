"""Month partitions of the tables that grow (migration 0021): create the months ahead, list them,
retire a month whole. The owner's work (DDL): the functions are not granted to any token."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

import psycopg

from ..errors import Invalid
from . import partman
from .db import translate_errors
from .sql import first_row

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
    partition (their rows move in); where pg_partman keeps the tables, its maintenance makes the
    months ahead (store/partman.py). Every partition then gets our protection (RLS on, no grants).
    The names created, in one transaction."""
    _check_ahead(months_ahead)
    with translate_errors(), conn.transaction():
        before = partman.partitions(conn)
        # rows waiting in a default partition get months of their own first: pg_partman cannot make a
        # month while its rows sit in the default partition
        conn.execute("SELECT mm_ensure_partitions(0)")
        partman.maintain(conn, months_ahead)
        conn.execute("SELECT mm_ensure_partitions(%(n)s::integer)", {"n": months_ahead})
        conn.execute("SELECT mm_harden_partitions()")
        return sorted(partman.partitions(conn) - before)


def adopt(conn: psycopg.Connection, months_ahead: int) -> partman.Adoption:
    """Hand the months to pg_partman (`db partitions --partman`; store/partman.py)."""
    _check_ahead(months_ahead)
    with translate_errors():
        return partman.adopt(conn, months_ahead)


def _check_ahead(months_ahead: int) -> None:
    if not 0 <= months_ahead <= 120:
        raise Invalid(f"--ahead (months_ahead) must be 0 to 120, not {months_ahead}")


def layout(conn: psycopg.Connection) -> list[Partition]:
    rows = conn.execute(
        "SELECT p.relname, c.relname, pg_get_expr(c.relpartbound, c.oid), c.reltuples::bigint "
        "FROM unnest(mm_partitioned_tables()) AS t(name) JOIN pg_class p ON p.oid = to_regclass(t.name) "
        "JOIN pg_inherits i ON i.inhparent = p.oid JOIN pg_class c ON c.oid = i.inhrelid "
        "ORDER BY p.relname, c.relname").fetchall()
    return [Partition(*row) for row in rows]


@dataclass(frozen=True)
class Retirement:
    month: str  # YYYY-MM
    sessions: int
    messages: int
    dropped: bool
    detached: list[str]


def retire(conn: psycopg.Connection, month: date, *, drop: bool) -> Retirement:
    """Detach `month` from every partitioned table (and drop it when `drop`), in one transaction.
    Plain DETACH: CONCURRENTLY is refused while a default partition exists, and the default
    partition is what keeps writes safe outside the created months; the detach itself is a catalog
    change (well under a second), bounded by a lock timeout so it never queues appends for long."""
    with translate_errors(), conn.transaction():
        conn.execute(f"SET LOCAL lock_timeout = '{RETIRE_LOCK_TIMEOUT}'")
        row = first_row(conn.execute("SELECT part_month, sessions, messages, dropped, detached "
                                     "FROM mm_retire_month(%s, %s)", (month, drop)).fetchone(), "mm_retire_month")
    return Retirement(f"{row[0]:%Y-%m}", row[1], row[2], row[3], list(row[4]))


@dataclass(frozen=True)
class Upkeep:
    """What doctor tells of the month partitions, from the catalog (readable by any login)."""

    partitioned: bool
    next_month_ready: bool  # next month's partition of messages exists
    default_rows: int  # the planner's estimate of rows waiting in messages_default
    partman_available: bool  # the server has pg_partman
    partman_keeps: bool  # pg_partman keeps messages' months in this database
    unhardened: int  # partitions of the growing tables without row-level security (made by pg_partman's worker)


def upkeep(conn: psycopg.Connection) -> Upkeep:
    # catalogs only (a token runs doctor too): pg_partman's create_parent leaves a template table
    # template_<schema>_<table> in the extension's schema for each parent it keeps
    row = first_row(conn.execute(
        "WITH parts AS (SELECT c.relrowsecurity FROM unnest(ARRAY['messages', 'message_search', 'message_embeddings']) "
        "  AS t(name) JOIN pg_inherits i ON i.inhparent = to_regclass(t.name) JOIN pg_class c ON c.oid = i.inhrelid), "
        "next AS (SELECT (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month')::date AS m) "
        "SELECT coalesce((SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass('messages')), false), "
        "EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid, next "
        "        WHERE i.inhparent = to_regclass('messages') "
        "          AND pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES FROM (%L) TO (%L)', next.m, "
        "              (next.m + interval '1 month')::date)), "
        "coalesce((SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass('messages_default')), 0), "
        "EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_partman'), "
        "EXISTS (SELECT 1 FROM pg_extension e JOIN pg_class t ON t.relnamespace = e.extnamespace "
        "        JOIN pg_class m ON m.oid = to_regclass('messages') JOIN pg_namespace n ON n.oid = m.relnamespace "
        "        WHERE e.extname = 'pg_partman' AND t.relname = 'template_' || n.nspname || '_messages'), "
        "(SELECT count(*) FROM parts WHERE NOT relrowsecurity)").fetchone(), "partition upkeep")
    return Upkeep(*row)
