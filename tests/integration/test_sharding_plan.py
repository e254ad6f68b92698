"""The sharding plan (mcp_memory/store/sharding.py, README "Sharding on paper") checked against the
migrated schema as the catalog shows it: every table classified, every unique key of a distributed
table holding session_id, no foreign key that cannot be co-located — apart from the gaps the plan
names, each with its change, which must all still be there (a fixed gap leaves the list)."""

from __future__ import annotations

import psycopg

from mcp_memory.store import sharding


def findings_by_key(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        found = sharding.lint(sharding.read_schema(conn))
    return {finding.split(":", 1)[0]: finding for finding in found}


def test_the_migrated_schema_follows_the_sharding_plan(fresh_db: str) -> None:
    found = findings_by_key(fresh_db)
    new = {key: why for key, why in found.items() if key not in sharding.KNOWN_GAPS}
    assert not new, "the schema breaks the sharding plan (fix the schema or the plan in store/sharding.py):\n" + \
        "\n".join(new.values())
    fixed = set(sharding.KNOWN_GAPS) - set(found)
    assert not fixed, f"gaps no longer in the schema: remove them from sharding.KNOWN_GAPS: {sorted(fixed)}"


def test_the_plan_classifies_each_table_once() -> None:
    kinds = [sharding.DISTRIBUTED, sharding.REFERENCE, sharding.COORDINATOR]
    assert all(not (a & b) for i, a in enumerate(kinds) for b in kinds[i + 1:])


def test_the_lint_finds_what_breaks_the_plan(empty_db: str) -> None:
    """A schema of its own with one breach of each rule: each is found; a partitioned table whose
    keys add the partition column after session_id passes, and its partitions are not tables of
    their own."""
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute("""
            CREATE TABLE sessions (session_id text PRIMARY KEY, parent text REFERENCES sessions (session_id));
            CREATE TABLE messages (session_id text REFERENCES sessions, part_month date, seq bigint,
                                   append_id text, PRIMARY KEY (session_id, part_month, seq),
                                   UNIQUE (session_id, part_month, append_id)) PARTITION BY RANGE (part_month);
            CREATE TABLE messages_2026_12 PARTITION OF messages FOR VALUES FROM ('2026-12-01') TO ('2027-01-01');
            CREATE TABLE snapshots (snapshot_id bigint PRIMARY KEY, session_id text REFERENCES sessions);
            CREATE UNIQUE INDEX message_search_seq ON messages_2026_12 (seq);
            CREATE TABLE decisions (session_id text, decision_id text, PRIMARY KEY (session_id, decision_id));
            CREATE UNIQUE INDEX decisions_by_id ON decisions (decision_id);
            CREATE TABLE access_tokens (role_name text PRIMARY KEY, session_id text REFERENCES sessions);
            CREATE TABLE export_jobs (job_id bigint PRIMARY KEY, snapshot_id bigint REFERENCES snapshots);
            CREATE TABLE scratch_notes (id int PRIMARY KEY);
        """)
    found = findings_by_key(empty_db)
    assert "foreign key sessions.sessions_parent_fkey" in found  # distributed → distributed, not on session_id
    assert "key snapshots.snapshots_pkey" in found
    assert "key decisions.decisions_by_id" in found
    assert "foreign key access_tokens.access_tokens_session_id_fkey" in found  # reference → distributed
    assert "foreign key export_jobs.export_jobs_snapshot_id_fkey" in found  # coordinator → distributed
    assert "unclassified scratch_notes" in found
    assert "missing message_search" in found
    assert not any(key.startswith(("key messages.", "foreign key messages.")) for key in found), found
    assert not any("messages_2026_12" in key for key in found), found
