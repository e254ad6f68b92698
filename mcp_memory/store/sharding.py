"""The sharding plan (README, "Sharding on paper"), declared once and checked against the migrated
schema (tests/integration/test_sharding_plan.py reads the catalog and lints it with `lint`).

Citus-style distribution: the tables that grow with conversations are distributed by `session_id`
and co-located (a session's messages, search rows, embeddings, decisions, context and snapshots
live on one worker, so every per-session statement — append, read, fork's copy, snapshot — is a
single-shard statement); small tables that every worker needs while it checks a token or an RLS
policy are reference tables (a copy on every worker); the archiver's queue and lease, the
migration ledger and the host reports stay on the coordinator (one writer, never joined on a
worker). `KNOWN_GAPS` lists what today's schema still has to change before it can be distributed,
each with the change; the lint fails on any other finding and on a gap that has been fixed (so
the list only shrinks).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import psycopg

DISTRIBUTION_COLUMN = "session_id"

DISTRIBUTED = frozenset({
    "sessions", "messages", "message_search", "message_embeddings", "decisions", "decision_versions",
    "session_context", "snapshots", "embedding_watermarks", "search_claims", "search_progress", "relay_exports",
})
REFERENCE = frozenset({
    "access_tokens", "access_token_projects",  # every RLS policy asks mm_token_projects() on the worker
    "notify_key",  # the append trigger computes the LISTEN channel key on the worker that stores the row
    "agents", "embedding_models", "synonyms",
    "search_doc_stats", "search_term_stats",  # per-project ranking statistics joined by every search
    "retired_months",  # every append and read asks whether its session's month has left the hot tables
    "gateway_key",  # every worker checks the proof of a transaction that switched to a token role
})
COORDINATOR = frozenset({
    "export_jobs", "archive_leader", "archive_nodes",  # the archiver's queue and lease: one writer
    "schema_migrations", "migration_lock", "host_reports",
})

# created only where the server has pgvector (migration 0005): a central server without it has none
WITH_PGVECTOR_ONLY = frozenset({"message_embeddings"})

# finding → the change that removes it when the schema is distributed
KNOWN_GAPS: dict[str, str] = {
    "key snapshots.snapshots_pkey": "primary key (session_id, snapshot_id); snapshot ids stay unique through "
                                    "their cluster-wide sequence",
    "key relay_exports.relay_exports_pkey": "primary key (session_id, project_id, agent, native_id); the "
                                            "per-project uniqueness of a native id is checked by mm_record_relay",
    "foreign key sessions.sessions_parent_session_id_fkey": "a fork's parent lives on another shard: dropped, "
                                                            "mm_fork checks the parent under its lock",
    "foreign key sessions.sessions_parent_snapshot_fk": "dropped for the same reason (mm_fork checks it)",
    "foreign key relay_exports.relay_exports_snapshot_id_fkey": "becomes (session_id, snapshot_id) → snapshots",
    "foreign key export_jobs.export_jobs_snapshot_id_fkey": "a coordinator table cannot reference a shard: "
                                                            "dropped, mm_snapshot writes both rows in one "
                                                            "transaction",
}


@dataclass(frozen=True)
class Schema:
    """What the lint needs from the catalog."""

    tables: dict[str, set[str]]  # table → its columns
    keys: list[tuple[str, str, list[str]]]  # (table, constraint or unique index, key columns)
    foreign_keys: list[tuple[str, str, str, list[tuple[str, str]]]]  # (table, name, referenced, column pairs)


def classification(table: str) -> str | None:
    for kind, members in (("distributed", DISTRIBUTED), ("reference", REFERENCE), ("coordinator", COORDINATOR)):
        if table in members:
            return kind
    return None


def lint(schema: Schema) -> list[str]:
    """Every finding, as `<kind> <table>.<name>: why` (the part before the colon is KNOWN_GAPS' key)."""
    findings = [f"unclassified {table}: not in the sharding plan (mcp_memory/store/sharding.py)"
                for table in sorted(schema.tables) if classification(table) is None]
    findings += [f"missing {table}: in the plan, not in the schema"
                 for table in sorted(DISTRIBUTED | REFERENCE | COORDINATOR)
                 if table not in schema.tables and table not in WITH_PGVECTOR_ONLY]
    for table in sorted(DISTRIBUTED & set(schema.tables)):
        if DISTRIBUTION_COLUMN not in schema.tables[table]:
            findings.append(f"column {table}.{DISTRIBUTION_COLUMN}: a distributed table lacks the distribution column")
    findings += _keys(schema.keys)
    findings += _foreign_keys(schema.foreign_keys)
    return findings


def _keys(keys: Iterable[tuple[str, str, list[str]]]) -> list[str]:
    """Each unique key of a distributed table holds the distribution column (in any position: a
    partitioned table may lead with or add its partition key)."""
    return [f"key {table}.{name}: ({', '.join(columns)}) lacks {DISTRIBUTION_COLUMN}"
            for table, name, columns in keys
            if table in DISTRIBUTED and DISTRIBUTION_COLUMN not in columns]


def _foreign_keys(foreign_keys: Iterable[tuple[str, str, str, list[tuple[str, str]]]]) -> list[str]:
    findings = []
    for table, name, target, pairs in foreign_keys:
        source, dest = classification(table), classification(target)
        if source == "distributed" and dest == "distributed":
            if (DISTRIBUTION_COLUMN, DISTRIBUTION_COLUMN) not in pairs:
                findings.append(f"foreign key {table}.{name}: to {target} not on {DISTRIBUTION_COLUMN} "
                                "(cannot be co-located)")
        elif dest == "distributed" or (dest == "coordinator" and source != "coordinator"):
            findings.append(f"foreign key {table}.{name}: a {source} table references {target} ({dest})")
    return findings


def read_schema(conn: psycopg.Connection, schema: str = "public") -> Schema:
    """The ordinary and partitioned tables of `schema` (not partitions, not an extension's), their
    unique keys (constraints and unique indexes) and foreign keys (not the copies on partitions)."""
    tables: dict[str, set[str]] = {}
    for table, column in conn.execute(_TABLES, (schema,)):
        tables.setdefault(table, set()).add(column)
    keys = [(t, n, list(c)) for t, n, c in conn.execute(_KEYS, (schema,)) if t in tables]
    fks = [(t, n, r, list(zip(a, b, strict=True))) for t, n, r, a, b in conn.execute(_FOREIGN_KEYS, (schema,))
           if t in tables]
    return Schema(tables, keys, fks)


_TABLES = """
SELECT c.relname, a.attname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                  AND d.deptype = 'e')"""

_KEYS = """
SELECT c.relname, i.relname,
       array(SELECT a.attname FROM unnest(x.indkey) AS k(attnum)
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum)
FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND x.indisunique"""

_FOREIGN_KEYS = """
SELECT c.relname, k.conname, r.relname,
       array(SELECT a.attname FROM unnest(k.conkey) WITH ORDINALITY AS u(attnum, i)
             JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.attnum ORDER BY u.i),
       array(SELECT a.attname FROM unnest(k.confkey) WITH ORDINALITY AS u(attnum, i)
             JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.attnum ORDER BY u.i)
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND k.contype = 'f' AND k.conparentid = 0"""
