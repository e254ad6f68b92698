"""Migration 0021 on a copy with millions of messages, and retiring a month: detach+drop vs DELETE.

Builds a database at schema 0019 (the migrations up to it), loads synthetic sessions spread over
12 past months (mixed English/Chinese payloads, search rows), then times `db migrate` to 0021
(the pause) and, on the partitioned result, retiring one month (detach + drop) against a DELETE of
the same rows from unpartitioned copies of messages and message_search. Prints one JSON document.
Other work on the machine slows every number alike; compare the ratios.

    python scripts/bench/partitions.py --dsn postgresql://user:pw@127.0.0.1:5443/postgres --messages 2000000
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import date

import psycopg

from mcp_memory.store import migrate

LOAD = """
INSERT INTO sessions (session_id, project_id, agent_source, title, created_at, last_seq)
SELECT 'ses_' || substr(md5(i::text), 1, 8) || '-' || substr(md5(i::text), 9, 4) || '-4' || substr(md5(i::text), 14, 3)
       || '-8' || substr(md5(i::text), 18, 3) || '-' || substr(md5(i::text), 21, 12),
       'proj-' || (i %% 50), 'claude-code', 'session ' || i,
       date_trunc('month', now()) - make_interval(months => 1 + i %% 12) + make_interval(hours => i %% 500),
       %(per)s
FROM generate_series(1, %(sessions)s) AS i;
INSERT INTO search_progress (session_id, project_id, indexed_seq, stored_seq)
SELECT session_id, project_id, last_seq, last_seq FROM sessions;
INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at)
SELECT s.session_id, n, s.project_id, 'a' || n, CASE WHEN n %% 2 = 1 THEN 'user' ELSE 'assistant' END,
       jsonb_build_object('role', CASE WHEN n %% 2 = 1 THEN 'user' ELSE 'assistant' END,
                          'content', 'message ' || n || ' about the build cache and 数据库 迁移 分区 ' || md5(s.session_id || n)
                                     || repeat(' lorem ipsum dolor', 8)),
       sha256(convert_to(s.session_id || n, 'UTF8')), s.created_at + make_interval(secs => n)
FROM sessions s, generate_series(1, %(per)s) AS n;
INSERT INTO message_search (session_id, seq, project_id, role, created_at, doc_len, tsv)
SELECT session_id, seq, project_id, role, created_at, 20, to_tsvector('simple', payload ->> 'content') FROM messages;
"""


def at_0019(dsn: str) -> None:
    """The migrations up to 0019: the schema an existing database has before this change."""
    keep = [m for m in migrate.available() if m.version <= 19]
    original = migrate.available
    migrate.available = lambda: keep
    try:
        migrate.migrate(dsn)
    finally:
        migrate.available = original


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True, help="a superuser DSN of a scratch server")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--per-session", type=int, default=100)
    parser.add_argument("--retire-only", action="store_true",
                        help="on the database a previous run left: only DELETE vs detach+drop of its oldest month")
    args = parser.parse_args()
    base = args.dsn.rsplit("/", 1)[0]
    if args.retire_only:
        only_retire(base + "/mm_partition_bench")
        return
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS mm_partition_bench")
        admin.execute("CREATE DATABASE mm_partition_bench")
    dsn = base + "/mm_partition_bench"
    at_0019(dsn)
    t0 = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        params = {"sessions": args.messages // args.per_session, "per": args.per_session}
        for statement in LOAD.split(";\n"):
            if statement.strip():
                conn.execute(statement, params)
        conn.execute("VACUUM ANALYZE")
        messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]  # type: ignore[index]
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    migrate.migrate(dsn)
    pause = time.perf_counter() - t0
    with psycopg.connect(dsn, autocommit=True) as conn:
        result = {"messages": messages, "load_seconds": round(load, 1), "migrate_seconds": round(pause, 2),
                  "seconds_per_million": round(pause / messages * 1e6, 2), **retire_vs_delete(conn)}
    print(json.dumps(result, indent=2))


PLAIN = (  # the month's rows as the unpartitioned schema held them: whole tables, same keys and indexes
    "CREATE TABLE plain_messages AS SELECT * FROM messages",
    "ALTER TABLE plain_messages ADD PRIMARY KEY (session_id, seq)",
    "CREATE UNIQUE INDEX ON plain_messages (session_id, append_id)",
    "CREATE TABLE plain_search AS SELECT * FROM message_search",
    "ALTER TABLE plain_search ADD PRIMARY KEY (session_id, seq)",
    "CREATE INDEX ON plain_search USING gin (tsv)",
    "CREATE INDEX ON plain_search (project_id, created_at DESC)",
    "VACUUM ANALYZE plain_messages, plain_search",
)


def retire_vs_delete(conn: psycopg.Connection) -> dict[str, object]:
    """The oldest live month: DELETE of its rows from unpartitioned copies of messages and
    message_search, against mm_retire_month (detach + drop) of the same rows; also a plain copy of
    all messages, to scale the numbers to this machine's speed at the time."""
    month = conn.execute("SELECT min(part_month) FROM sessions WHERE part_month NOT IN "
                         "(SELECT part_month FROM retired_months)").fetchone()[0]  # type: ignore[index]
    assert isinstance(month, date)
    rows = conn.execute("SELECT count(*) FROM messages WHERE part_month = %s", (month,)).fetchone()[0]  # type: ignore[index]
    t0 = time.perf_counter()
    for statement in PLAIN:
        conn.execute(statement)
    copy = time.perf_counter() - t0
    t0 = time.perf_counter()
    with conn.transaction():
        for table in ("plain_messages", "plain_search"):
            conn.execute(f"DELETE FROM {table} WHERE session_id IN (SELECT session_id FROM sessions "
                         "WHERE part_month = %s)", (month,))
    delete = time.perf_counter() - t0
    conn.execute("DROP TABLE plain_messages, plain_search")
    t0 = time.perf_counter()
    conn.execute("SELECT mm_retire_month(%s, true)", (month,))
    retire = time.perf_counter() - t0
    return {"retired_month": f"{month:%Y-%m}", "month_messages": rows, "plain_copy_seconds": round(copy, 1),
            "delete_seconds": round(delete, 2), "detach_drop_seconds": round(retire, 3)}


def only_retire(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        print(json.dumps(retire_vs_delete(conn), indent=2))


if __name__ == "__main__":
    main()
