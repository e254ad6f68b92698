"""Growth: what append, read and search cost as the store grows to 1M, 3M and 10M messages.

Usage: python scripts/bench/growth.py [--sizes 1M,3M,10M] [--dsn DSN] [--json] [--queries 40]

The default DSN is the benchmark cluster on this machine (PostgreSQL 15 cluster `growth`, port
5441, database mm_growth; settings in README "Growth"). The database is created and migrated with
the package's own migrations when absent, and the load is incremental: loading 3M after 1M adds
2M (growth_corpus.py: COPY as the owner, bypassing mm_append for speed, with the same derived
columns; a sample is checked against the real append path and indexer). Per size it reports, each
next to a physical limit measured in the same run:

- append_message p50/p95 (core Service, one message, commit) vs a raw INSERT + COMMIT;
- append_messages of 20 vs a raw 20-row INSERT + COMMIT;
- the last page (100) of a very long session (read_session) vs a raw index lookup of those rows;
- search_messages (fts) p50/p95 for a rare and a common word, in one project and in all,
  vs a raw GIN lookup of the same word (LIMIT 10, as the owner), measured as each caller of
  `--callers`: `token` (a read-only token of every project, logged in directly, as a host
  searches), `pgbouncer` (the same token through a PgBouncer started with the guide's settings,
  gateway mode) and `owner` (the database owner); each with the package's shipped timeouts, a call
  cut off by them counted in `errors`;
- table and index sizes, and VACUUM ANALYZE of messages and message_search.
Progress goes to stderr; --json prints one JSON document at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import tempfile
import time
import uuid
from dataclasses import replace
from typing import Any

import psycopg
from growth_corpus import RARE_WORDS, build_pool, load_step, plan_step, progress  # same folder
from growth_verify import verify_sample
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb
from search_bench import percentile as pct
from search_bench import sentence, timed

from mcp_memory.config import Settings, load_settings
from mcp_memory.search.query import lexeme
from mcp_memory.search.tokenizer import iter_terms
from mcp_memory.security import tokens
from mcp_memory.store import migrate
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

DEFAULT_DSN = "host=/var/run/postgresql port=5441 user=postgres dbname=mm_growth"
NOW = 1796083200.0  # 2026-12-01: the corpus' newest day (fixed, so that two runs load the same rows)
TITLE = "growth session %"


def size_of(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * scale)


def ensure_database(dsn: str) -> None:
    name = conninfo_to_dict(dsn).get("dbname")
    with psycopg.connect(make_conninfo(dsn, dbname="postgres"), autocommit=True) as admin:
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(str(name))))
            progress(f"database {name} created")
    migrate.migrate(dsn)


def loaded(conn) -> int:
    row = conn.execute("SELECT coalesce(sum(last_seq), 0) FROM sessions WHERE title LIKE %s", (TITLE,)).fetchone()
    return int(row[0])


def grow(conn, pool_factory, target: int, state: dict) -> None:
    have = loaded(conn)
    if have >= target:
        progress(f"{have:,} messages loaded already (≥ {target:,})")
        return
    if "pool" not in state:
        state["pool"] = pool_factory()
    rng = random.Random(have + 1)
    plan = plan_step(rng, target - have, NOW)
    gin = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'message_search_tsv'").fetchone()
    # dropped and rebuilt in the load's transaction (faster than row by row; a load cut short leaves
    # the index as it was)
    conn.execute("DROP INDEX IF EXISTS message_search_tsv")
    load_step(conn, plan, state["pool"], seed=have + 1, commit=False)
    start = time.perf_counter()
    conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
    # a partitioned table's definition reads `ON ONLY …` (the parent alone): the rebuild covers every partition
    conn.execute(gin[0].replace(" ON ONLY ", " ON ") if gin else
                 "CREATE INDEX message_search_tsv ON public.message_search USING gin (tsv)")
    conn.commit()
    progress(f"GIN index rebuilt ({time.perf_counter() - start:.0f} s)")


def figure(values: list[float], limit: list[float] | None = None, errors: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"p50": round(statistics.median(values), 2), "p95": round(pct(values, 0.95), 2),
                           "max": round(max(values), 2), "n": len(values),
                           "over_1s": sum(1 for v in values if v > 1000), "errors": errors}
    if limit:
        out["limit_p50"] = round(statistics.median(limit), 2)
        out["limit_p95"] = round(pct(limit, 0.95), 2)
    return out


def bench_append(service, conn, count: int) -> dict[str, Any]:
    rng = random.Random(3)
    sid = service.create_session("p01", {"title": "growth append bench"}).session_id
    bodies = [" ".join(sentence(rng) for _ in range(3)) for _ in range(count * 21)]
    single = timed(lambda i: service.append_message(sid, {"role": "user", "content": bodies[i]}), count)
    batch_sid = service.create_session("p01", {"title": "growth batch bench"}).session_id
    batches = max(10, count // 5)
    batch = timed(lambda i: service.append_messages(
        batch_sid, [{"role": "assistant", "content": b} for b in bodies[count + i * 20: count + i * 20 + 20]]), batches)
    conn.execute("CREATE TABLE IF NOT EXISTS growth_raw_insert "
                 "(session_id text, seq bigint, payload jsonb, PRIMARY KEY (session_id, seq))")
    conn.commit()

    def raw(i: int) -> None:
        conn.execute("INSERT INTO growth_raw_insert VALUES (%s, %s, %s)", (sid, i, Jsonb({"content": bodies[i]})))
        conn.commit()

    def raw_batch(i: int) -> None:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO growth_raw_insert VALUES (%s, %s, %s)",
                            [(batch_sid, i * 20 + k, Jsonb({"content": bodies[count + i * 20 + k]})) for k in range(20)])
        conn.commit()

    try:
        ref, ref_batch = timed(raw, count), timed(raw_batch, batches)
    finally:
        conn.execute("DROP TABLE growth_raw_insert")
        conn.commit()
    for session in (sid, batch_sid):  # indexed now, not by the first search timed below
        service.indexer.index_session(session)
    return {"append_single": figure(single, ref), "append_batch20": figure(batch, ref_batch)}


def bench_read(service, conn, repeats: int) -> dict[str, Any]:
    sid, last = conn.execute("SELECT session_id, last_seq FROM sessions WHERE title LIKE %s "
                             "ORDER BY last_seq DESC, session_id LIMIT 1", (TITLE,)).fetchone()
    page = timed(lambda i: service.read_session(sid, after_seq=last - 100, limit=100), repeats)
    ref = timed(lambda i: conn.execute("SELECT seq, role, payload FROM messages WHERE session_id = %s AND seq > %s "
                                       "ORDER BY seq LIMIT 100", (sid, last - 100)).fetchall(), repeats)
    return {"last_page": figure(page, ref), "long_session_messages": last}


WORDS = {  # word class → words asked (share of the messages holding them, see README "Growth")
    "common": ["deploy", "用户"],  # about 10 %
    "very_common": ["order", "订单"],  # about 80 %: the head of the Zipf vocabulary
}


def lexeme_of(word: str) -> str:
    """The word as the index stores it (the package's tokenizer and stemmer), for the raw lookup."""
    term = next(iter_terms(word))[0]
    return lexeme(term)


def bench_search(callers: dict[str, Any], conn, queries: int, *, rare_only_n: int | None = None) -> dict[str, Any]:
    """Each figure as each caller (name → Service): keys search_<word>_<scope>[_<caller>] (the owner's
    without a suffix, as before)."""
    rng = random.Random(5)
    rare = list(rng.sample(RARE_WORDS, 2000))
    present = [r[0] for r in conn.execute(
        "SELECT w FROM unnest(%s::text[]) AS w WHERE EXISTS (SELECT 1 FROM message_search "
        "WHERE tsv @@ to_tsquery('simple', w)) LIMIT %s", (rare, queries)).fetchall()]
    projects = [f"p{n:02d}" for n in range(5)]
    out: dict[str, Any] = {}
    for word_kind, words in (("rare", present), ("common", WORDS["common"]), ("very_common", WORDS["very_common"])):
        for scope in ("project", "all"):
            n = queries if word_kind == "rare" else max(3, queries // (2 if scope == "project" else 4))
            if rare_only_n is not None and word_kind != "rare":
                n = min(n, rare_only_n)
            picks = [(words[i % len(words)], projects[i % len(projects)] if scope == "project" else None)
                     for i in range(n)]

            def raw(i: int, picks=picks) -> None:
                word, project = picks[i]
                sql = "SELECT session_id, seq FROM message_search WHERE tsv @@ %s::tsquery"
                args: tuple = (lexeme_of(word),)
                if project:
                    sql, args = sql + " AND project_id = %s", (*args, project)
                conn.execute(sql + " LIMIT 10", args, prepare=False).fetchall()

            limit = timed(raw, n)
            for caller, service in callers.items():
                errors: list[str] = []

                def real(i: int, picks=picks, service=service, errors=errors) -> None:
                    try:
                        service.search_messages(picks[i][0], project_id=picks[i][1], mode="fts")
                    except Exception as exc:  # a call cut off by the shipped timeouts counts, and the run goes on
                        errors.append(f"{type(exc).__name__}: {exc}")

                label = f"search_{word_kind}_{scope}" + ("" if caller == "owner" else f"_{caller}")
                real(0)  # a first call loads the tokenizer's tables
                errors.clear()
                out[label] = figure(timed(real, n), limit, errors=len(errors))
                if errors:
                    out[label]["first_error"] = errors[0][:200]
                progress(f"{label}: {out[label]}")
    conn.rollback()
    return out


def sizes(conn) -> dict[str, Any]:
    # a partitioned table (relkind p) holds nothing itself: its size is its partitions'
    rows = conn.execute("""
        SELECT c.relname, sum(pg_table_size(t.relid)), sum(pg_indexes_size(t.relid)) FROM pg_class c
        CROSS JOIN LATERAL (SELECT relid FROM pg_partition_tree(c.oid) WHERE isleaf
                            UNION SELECT c.oid WHERE c.relkind = 'r') AS t
        WHERE c.relname IN ('messages', 'message_search', 'sessions', 'search_term_stats') AND c.relkind IN ('r', 'p')
        GROUP BY c.relname ORDER BY c.relname""").fetchall()
    return {name: {"table_mb": round(t / 2**20), "indexes_mb": round(i / 2**20)} for name, t, i in rows}


def vacuum(dsn: str) -> dict[str, float]:
    out = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ("messages", "message_search"):
            start = time.perf_counter()
            conn.execute(psycopg.sql.SQL("VACUUM ANALYZE {}").format(psycopg.sql.Identifier(table)))
            out[table] = round(time.perf_counter() - start, 1)
    return out


def measure(dsn: str, service, callers: dict[str, Any], args) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        result: dict[str, Any] = {"messages": loaded(conn)}
        if args.only_search:  # e.g. the code before a change to search, on the same data
            result.update(bench_search(callers, conn, args.queries, rare_only_n=args.slow_queries))
            return result
        result["vacuum_analyze_s"] = vacuum(dsn)
        progress(f"vacuum analyze {result['vacuum_analyze_s']}")
        result.update(bench_append(service, conn, args.appends))
        progress(f"append {result['append_single']} batch {result['append_batch20']}")
        result.update(bench_read(service, conn, args.queries))
        progress(f"last page {result['last_page']}")
        result.update(bench_search(callers, conn, args.queries))
        result["sizes"] = sizes(conn)
        conn.commit()
    return result


def report(results: list[dict[str, Any]]) -> None:
    cols = [("append_single", "append"), ("append_batch20", "batch of 20"), ("last_page", "last page"),
            ("search_rare_project", "rare, project"), ("search_rare_all", "rare, all"),
            ("search_common_project", "common, project"), ("search_common_all", "common, all"),
            ("search_very_common_project", "v. common, project"), ("search_very_common_all", "v. common, all")]
    cols = [(key + suffix, label + tag) for key, label in cols
            for suffix, tag in (("", ""), ("_token", " (token)"), ("_pgbouncer", " (pgbouncer)"))]
    for key, label in cols:
        if key not in results[0]:
            continue
        print(f"{label:<32}" + "".join(
            f"  {r['messages'] / 1e6:>4.1f}M p50 {r[key]['p50']:8.1f} p95 {r[key]['p95']:8.1f} "
            f"(limit p50 {r[key].get('limit_p50', 0):6.1f}, errors {r[key].get('errors', 0)})" for r in results))
    for r in results:
        if "sizes" in r:
            print(f"{r['messages']:,} messages: sizes {r['sizes']}; VACUUM ANALYZE {r['vacuum_analyze_s']} s")


def searchers(stack: contextlib.ExitStack, settings: Settings, dsn: str, wanted: list[str], *,
              owner_service) -> dict[str, Any]:
    """caller → the Service that searches as it: a read-only token of every project (dropped at the
    end), directly and through PgBouncer (scripts/bench/pool_tier_support.py: the guide's settings,
    auth_query, the gateway login forced), and the owner."""
    out: dict[str, Any] = {}
    if "token" in wanted or "pgbouncer" in wanted:
        owner = Database(settings)
        stack.callback(owner.close)
        tag = uuid.uuid4().hex[:6]
        token = tokens.create(owner, name=f"growth_{tag}", projects=["*"], read_only=True)
        stack.callback(tokens.revoke, owner, token.name)
        if "token" in wanted:
            out["token"] = host_service(stack, settings, token.dsn, token.token)
        if "pgbouncer" in wanted:
            from pool_tier_support import bouncer  # same folder; starts PgBouncer, stopped by its PID

            gateway = tokens.create_gateway(owner, name=f"growth_{tag}_gw")
            stack.callback(drop_roles, dsn, [gateway.role])
            stack.callback(drop_roles, dsn, [f"mmbench_{tag}_pgb"])  # its lookup login, once it has stopped
            port, _lookup = stack.enter_context(bouncer(dsn, gateway, max_clients=50, tag=tag))
            dbname = conninfo_to_dict(dsn)["dbname"]
            pooled = make_conninfo("", host="127.0.0.1", port=port, dbname=dbname, user=token.role)
            out["pgbouncer"] = host_service(stack, settings, pooled, token.token, gateway=True)
    if "owner" in wanted:
        out["owner"] = owner_service
    return out


def host_service(stack: contextlib.ExitStack, settings: Settings, dsn: str, password: str, *, gateway: bool = False):
    host = build(replace(settings, dsn=dsn, password=password, pgbouncer=gateway, gateway=gateway, pool_min=0,
                         pool_max=2, auto_migrate=False), application_name="growth bench host", local=False)
    stack.callback(host.db.close)
    return host


def drop_roles(dsn: str, roles: list[str]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for role in roles:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(role)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,3M,10M")
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--no-measure", action="store_true", help="load only")
    parser.add_argument("--no-load", action="store_true", help="measure what is loaded, once")
    parser.add_argument("--only-search", action="store_true", help="measure search only")
    parser.add_argument("--slow-queries", type=int, help="at most this many common-word searches per figure")
    parser.add_argument("--verify", type=int, default=200, help="messages checked against the real indexer")
    parser.add_argument("--callers", default="token,pgbouncer,owner",
                        help="who searches: token (direct login), pgbouncer (gateway tier), owner")
    args = parser.parse_args()
    ensure_database(args.dsn)
    settings = load_settings(dsn=args.dsn, environ={"MCP_MEMORY_HOME": tempfile.gettempdir()})
    # the owner's service loads and appends; searches run with the package's shipped timeouts
    service = build(replace(settings, pool_max=2))
    service.indexer.submit = lambda session_id: None  # indexing is timed apart (search_bench.py)
    wanted = [c.strip() for c in args.callers.split(",") if c.strip()]
    unknown = sorted(set(wanted) - {"owner", "token", "pgbouncer"})
    if unknown:
        parser.error(f"--callers: unknown caller(s) {', '.join(unknown)}; choose from owner, token, pgbouncer")
    results = []
    with contextlib.ExitStack() as stack:
        stack.callback(service.db.close)
        callers = searchers(stack, settings, args.dsn, wanted, owner_service=service)
        targets = [] if args.no_load else [size_of(s) for s in args.sizes.split(",")]
        state: dict = {}
        with psycopg.connect(args.dsn) as conn:
            for target in targets or [0]:
                if target:
                    grow(conn, build_pool, target, state)
                    if args.verify:
                        progress(f"verify: {verify_sample(service, conn, args.verify)}")
                if not args.no_measure:
                    results.append(measure(args.dsn, service, callers, args))
                    progress(f"measured at {results[-1]['messages']:,}")
    if args.json:
        print(json.dumps(results, indent=1))
    elif results:
        report(results)


if __name__ == "__main__":
    main()
