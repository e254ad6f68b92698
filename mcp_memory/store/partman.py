"""pg_partman keeps the month partitions where it is installed (README, "Partitions": pg_partman).
The owner's work: a token runs no DDL.

What this relies on, checked against pg_partman 4.7.2 (Debian's postgresql-15-partman):
- `create_parent(parent, control, 'native', 'monthly', p_premake, p_start_partition)` takes over a
  partitioned table whose month partitions are named `<table>_pYYYY_MM` (migration 0025 names ours
  so) and makes the months from `p_start_partition` up to `p_premake` months ahead, skipping those
  that exist. When it makes a month it also creates `<table>_default`, so ours steps aside first (it
  is empty once its rows moved into months of their own) and is dropped, or comes back when it made
  none. It warns, and returns false, when every month existed already.
- `run_maintenance(parent)` makes the months ahead from the newest one; its `part_config` row says
  how many (`premake`) and whether to keep making them when no new rows came
  (`infinite_time_partitions`). `retention` NULL keeps every month: months leave only through
  `db partitions --retire`, which asks the git archive first (archive/cold.py).
- The partitions it makes have neither row-level security nor our revoked privileges, so
  `mm_harden_partitions` (migration 0025) runs after it in the same transaction.
- CREATE EXTENSION pg_partman needs a superuser (the extension is not trusted)."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql

from ..errors import Unavailable
from .sql import first_row

CREATE_HINT = ("a superuser runs, in this database: CREATE SCHEMA partman; CREATE EXTENSION pg_partman SCHEMA partman; "
               "and grants the owner login its use (install/README.md, \"Month partitions, and pg_partman\")")


@dataclass(frozen=True)
class Adoption:
    schema: str  # where the extension lives
    adopted: list[str]  # parents handed to pg_partman by this call
    made: list[str]  # partitions created (schema-qualified)
    hardened: list[str]


def extension_schema(conn: psycopg.Connection) -> str | None:
    row = conn.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                       "WHERE e.extname = 'pg_partman'").fetchone()
    return row[0] if row else None


def managed(conn: psycopg.Connection, schema: str | None = None) -> dict[str, str]:
    """Our partitioned tables that pg_partman keeps: table name → schema-qualified parent."""
    schema = schema or extension_schema(conn)
    if schema is None:
        return {}
    kept = {row[0] for row in conn.execute(
        sql.SQL("SELECT parent_table FROM {}.part_config").format(sql.Identifier(schema))).fetchall()}
    return {table: parent for table, parent in _parents(conn) if parent in kept}


def partitions(conn: psycopg.Connection) -> set[str]:
    """Every partition of our partitioned tables, schema-qualified as the month functions name them."""
    rows = conn.execute(
        "SELECT format('%I.%I', n.nspname, c.relname) FROM unnest(mm_partitioned_tables()) AS t(name) "
        "JOIN pg_inherits i ON i.inhparent = to_regclass(t.name) JOIN pg_class c ON c.oid = i.inhrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace").fetchall()
    return {row[0] for row in rows}


def _install(conn: psycopg.Connection) -> str:
    """The extension's schema, creating it when the server has it and this login may."""
    schema = extension_schema(conn)
    if schema:
        return schema
    available = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_partman')"
                             ).fetchone()
    if not (available and available[0]):
        raise Unavailable("pg_partman is not installed on this database server (Debian: postgresql-15-partman; the "
                          "embedded server has none): the months stay with `mcp-memory db partitions`")
    try:
        with conn.transaction():
            conn.execute("CREATE SCHEMA IF NOT EXISTS partman")
            conn.execute("CREATE EXTENSION pg_partman SCHEMA partman")
    except psycopg.errors.InsufficientPrivilege as exc:
        raise Unavailable(f"pg_partman is on the server but not in this database, and this login may not create it: "
                          f"{CREATE_HINT}") from exc
    return "partman"


def adopt(conn: psycopg.Connection, months_ahead: int) -> Adoption:
    """Hand every partitioned table to pg_partman, in one transaction; a table it keeps already is left
    as it is (running this again changes nothing but the months ahead)."""
    schema = _install(conn)
    partman = sql.Identifier(schema)
    premake = max(months_ahead, 1)
    with conn.transaction():
        before = partitions(conn)
        # rows waiting in a default partition first get months of their own: the default partition steps aside
        conn.execute("SELECT mm_ensure_partitions(0)")
        kept = managed(conn, schema)
        adopted: list[str] = []
        for table, parent in _parents(conn):
            if table in kept:
                continue
            default = f"{table}_default"
            conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(table)))
            waiting = conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(sql.Identifier(default)))
            if first_row(waiting.fetchone(), "default partition check")[0]:
                raise Unavailable(f"{default} still holds rows outside every month; run `mcp-memory db partitions` "
                                  f"and try again")
            conn.execute(sql.SQL("ALTER TABLE {} DETACH PARTITION {}").format(sql.Identifier(table),
                                                                             sql.Identifier(default)))
            conn.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(sql.Identifier(default),
                                                                      sql.Identifier(f"{default}_mm")))
            conn.execute(sql.SQL(
                "SELECT {}.create_parent(p_parent_table := %s, p_control := 'part_month', p_type := 'native', "
                "p_interval := 'monthly', p_premake := %s, p_inherit_fk := false, "
                "p_start_partition := to_char(date_trunc('month', now() AT TIME ZONE 'UTC'), 'YYYY-MM-DD'))"
            ).format(partman), (parent, premake))
            if first_row(conn.execute("SELECT to_regclass(%s) IS NULL", (default,)).fetchone(), "to_regclass")[0]:
                # it makes its default partition only when it made a month: ours comes back
                conn.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(sql.Identifier(f"{default}_mm"),
                                                                          sql.Identifier(default)))
                conn.execute(sql.SQL("ALTER TABLE {} ATTACH PARTITION {} DEFAULT").format(sql.Identifier(table),
                                                                                         sql.Identifier(default)))
            else:
                conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(f"{default}_mm")))
            adopted.append(parent)
        _configure(conn, partman, premake)
        hardened = _finish(conn, months_ahead)
        made = sorted(partitions(conn) - before)
    return Adoption(schema, adopted, made, hardened)


def maintain(conn: psycopg.Connection, months_ahead: int) -> bool:
    """pg_partman's maintenance of the tables it keeps, `months_ahead` months ahead; False when it keeps
    none. Runs inside the caller's transaction, before mm_ensure_partitions and mm_harden_partitions."""
    schema = extension_schema(conn)
    parents = managed(conn, schema)
    if not schema or not parents:
        return False
    partman = sql.Identifier(schema)
    _configure(conn, partman, max(months_ahead, 1))
    for parent in sorted(parents.values()):
        conn.execute(sql.SQL("SELECT {}.run_maintenance(p_parent_table := %s, p_jobmon := false)").format(partman),
                     (parent,))
    return True


def _configure(conn: psycopg.Connection, partman: sql.Identifier, premake: int) -> None:
    # months ahead whether or not rows came; none dropped by pg_partman (retirement asks the archive)
    conn.execute(sql.SQL("UPDATE {}.part_config SET premake = %s, infinite_time_partitions = true, retention = NULL "
                         "WHERE parent_table = ANY(%s)").format(partman),
                 (premake, [parent for _, parent in _parents(conn)]))


def _parents(conn: psycopg.Connection) -> list[tuple[str, str]]:
    """(table, schema-qualified table) of each of our partitioned tables."""
    rows = conn.execute("SELECT t.name, n.nspname || '.' || p.relname FROM unnest(mm_partitioned_tables()) AS t(name) "
                        "JOIN pg_class p ON p.oid = to_regclass(t.name) JOIN pg_namespace n ON n.oid = p.relnamespace"
                        ).fetchall()
    return [(row[0], row[1]) for row in rows]


def _finish(conn: psycopg.Connection, months_ahead: int) -> list[str]:
    conn.execute("SELECT mm_ensure_partitions(%s::integer)", (months_ahead,))
    row = conn.execute("SELECT mm_harden_partitions()").fetchone()
    return list(row[0] or []) if row else []
