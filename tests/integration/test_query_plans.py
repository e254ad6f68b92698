"""The hot queries' filters reach the planner as plain comparisons, for every filter combination.

Each store method runs for real (its statements recorded as they are executed); each recorded
statement is then planned as a GENERIC plan (PREPARE + EXPLAIN (FORMAT JSON) EXECUTE under
plan_cache_mode = force_generic_plan), which is what a prepared statement, a pooler's cached plan
and partition pruning at executor start-up see. A catch-all `($1 IS NULL OR col = $1)` cannot be
folded away there: it stays in the plan as a qual no index and no partition can use. Each given
filter must instead appear as `column <op> $n` in the quals of the plan (index conditions where an
index serves it), and no qual may test a parameter for NULL.

To check partition pruning on a partitioned schema, walk the same plans: `nodes(plan)` yields every
node, so `any("Subplans Removed" in n for n in nodes(plan))` (or the count of Append children per
partitioned table, `relations(plan)`) is one more assertion in `check_plan`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any, ClassVar

import psycopg
import pytest
from partition_support import old_session
from psycopg import sql

from mcp_memory.core.messages import canonical_json
from mcp_memory.search.index import index_message
from mcp_memory.store.archive_store import ArchiveStore
from mcp_memory.store.core_store import NewMessage, Store
from mcp_memory.store.embedding_store import EmbeddingStore, PendingSession
from mcp_memory.store.memory_store import MemoryStore
from mcp_memory.store.search_store import NEWEST_ABOVE, IndexRow, Scope, SearchStore
from mcp_memory.store.ui_store import SessionFilter, UiStore

QUALS = ("Index Cond", "Recheck Cond", "Filter", "Join Filter", "Hash Cond", "Merge Cond", "One-Time Filter")
PLACEHOLDER = re.compile(r"%\((\w+)\)[sb]")
NULL_TEST = re.compile(r"\$\d+\)?(::[\w\[\] ]+\)?)? IS (NOT )?NULL")
SINCE = datetime(2025, 1, 1, tzinfo=UTC)
UNTIL = datetime(2026, 1, 1, tzinfo=UTC)


class Recording(psycopg.Cursor):
    """A cursor that keeps each statement it executes (text and parameters)."""

    log: ClassVar[list[tuple[Any, dict[str, Any]]]] = []

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if params is None or isinstance(params, dict):  # the stores' statements: named parameters
            Recording.log.append((query, dict(params or {})))
        return super().execute(query, params, **kwargs)


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan, depth first (sub-plans and init plans included)."""
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def quals(plan: dict[str, Any], kinds: tuple[str, ...] = QUALS) -> list[str]:
    return [node[kind] for node in nodes(plan) for kind in kinds if kind in node]


def relations(plan: dict[str, Any]) -> list[str]:
    """The tables a plan reads, a month partition (migration 0021) by its table's name."""
    return [PARTITION.sub("", node["Relation Name"]) for node in nodes(plan) if "Relation Name" in node]


PARTITION = re.compile(r"_(p\d{6}|default)$")


def generic_plan(conn: psycopg.Connection, query: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The generic plan of a recorded statement: its %(name)s placeholders become $1…$n."""
    text = query if isinstance(query, str) else query.as_string(conn)
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    numbered = PLACEHOLDER.sub(number, text)
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute("SET enable_seqscan = off")  # tiny tables: show the plan the indexes allow
    types = [sql_type(params[name]) for name in order]
    conn.execute(f"PREPARE hot({', '.join(types)}) AS {numbered}" if order else f"PREPARE hot AS {numbered}")
    try:
        # EXPLAIN takes no bound parameters: the values as quoted literals (psycopg.sql.Literal)
        args = sql.SQL(", ").join(sql.SQL("{}::" + t).format(sql.Literal(params[name]))
                                  for name, t in zip(order, types, strict=True))
        row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE hot({})").format(args) if order
                           else "EXPLAIN (FORMAT JSON) EXECUTE hot").fetchone()
    finally:
        conn.execute("DEALLOCATE hot")
    assert row is not None
    return row[0][0]["Plan"]


def sql_type(value: Any) -> str:
    """The parameter's type as the application sends it (psycopg's dumpers)."""
    if isinstance(value, list):
        return sql_type(value[0]) + "[]" if value else "text[]"
    for kind, name in ((bool, "boolean"), (int, "bigint"), (float, "float8"), (datetime, "timestamptz"),
                       (date, "date")):
        if isinstance(value, kind):
            return name
    return "text"


def check_plan(plan: dict[str, Any], given: dict[str, str], indexed: tuple[str, ...] = ()) -> None:
    """No parameter tested for NULL; each given filter (column → SQL operator) compared with a
    parameter; the `indexed` ones in an index condition."""
    every = quals(plan)
    assert not [q for q in every if NULL_TEST.search(q)], every
    for column, op in given.items():
        pattern = re.compile(rf"\b{re.escape(column)}\)? {re.escape(op)} \(?\$\d+")
        assert any(pattern.search(q) for q in every), (column, op, every)
        if column in indexed:
            assert any(pattern.search(q) for q in quals(plan, ("Index Cond", "Recheck Cond"))), (column, every)


@pytest.fixture
def recorded(fresh_db: str, service) -> Iterator[psycopg.Connection]:
    """A connection whose statements are recorded, on a database holding a session, a decision and
    context (the plans do not depend on the rows, the types of the columns do)."""
    sid = service.create_session("plans", {"title": "plans", "agent_source": "claude-code"}).session_id
    service.append_messages(sid, [{"role": "user", "content": "order payment timeout 订单 超时"}] * 3)
    service.indexer.index_session(sid)
    service.record_decision(sid, decision_type="architecture", summary="use a queue for orders")
    service.set_context(sid, "plan", {"step": 1})
    with psycopg.connect(fresh_db, cursor_factory=Recording) as conn:
        Recording.log = []
        conn.sid = sid  # type: ignore[attr-defined]
        yield conn


def explain_recorded(conn: psycopg.Connection, run: Any) -> list[dict[str, Any]]:
    """Run `run(conn)` (store calls), then the generic plan of each statement it executed."""
    Recording.log = []
    run(conn)
    conn.rollback()
    log, Recording.log = Recording.log, []
    return [generic_plan(conn, query, params) for query, params in log if is_query(conn, query)]


def is_query(conn: psycopg.Connection, query: Any) -> bool:
    """A SELECT (or WITH … SELECT), not a SET the store runs before it."""
    text = query if isinstance(query, str) else query.as_string(conn)
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).lstrip().upper()
    return code.startswith(("SELECT", "WITH"))


SCOPE_FILTERS: dict[str, tuple[Any, str, str]] = {  # Scope field → (value, column as the plan prints it, operator)
    "project_id": ("plans", "project_id", "="),
    "agent_source": ("claude-code", "agent_source", "="),
    "since": (SINCE, "created_at", ">="),
    "until": (UNTIL, "created_at", "<"),
}


def combinations(names: list[str]) -> Iterator[tuple[str, ...]]:
    for size in range(len(names) + 1):
        yield from itertools.combinations(names, size)


# mm_search_candidates (migration 0030) runs the statement mm_search_candidates_query builds, with
# these parameters ($1 … $16, in this order); `scope` ($16) is the caller's projects under a token
CANDIDATE_TYPES = ("tsquery", "text[]", "float8[]", "float8", "float8", "float8", "integer", "text", "text",
                   "timestamptz", "timestamptz", "text", "text[]", "bigint[]", "bigint[]", "text[]")


def candidate_plan(conn: psycopg.Connection, scope: Scope, *, newest: bool, scoped: bool) -> dict[str, Any]:
    """The generic plan of the candidate statement for this scope, as a token (`scoped`) or the owner."""
    p = scope.params()
    segments = len(scope.segments) if scope.segments is not None else None
    text = conn.execute("SELECT mm_search_candidates_query(%s, %s, %s, %s, %s, %s, %s, %s, %s)", (
        scoped, newest, scope.echoes, p["project_id"] is not None, p["role"] is not None, p["since"] is not None,
        p["until"] is not None, p["agent_source"] is not None, segments)).fetchone()[0]
    values = ["'order'", ["order"], [1.0], 5.0, 1.2, 0.75, 300, p["project_id"], p["role"], p["since"], p["until"],
              p["agent_source"], p["seg_sessions"], p["seg_lower"], p["seg_upper"], ["plans"]]
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute("SET enable_seqscan = off")  # tiny tables: show the plan the indexes allow
    conn.execute(f"PREPARE hot({', '.join(CANDIDATE_TYPES)}) AS {text}")
    try:
        args = sql.SQL(", ").join(sql.SQL("{}::" + t).format(sql.Literal(v)) for v, t in zip(values, CANDIDATE_TYPES,
                                                                                           strict=True))
        row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE hot({})").format(args)).fetchone()
    finally:
        conn.execute("DEALLOCATE hot")
    assert row is not None
    return row[0][0]["Plan"]


@pytest.mark.parametrize("chosen", list(combinations(list(SCOPE_FILTERS))))
@pytest.mark.parametrize("expected", [None, NEWEST_ABOVE + 1], ids=["every-match", "newest-cut"])
def test_search_candidates_and_hits(recorded, chosen, expected) -> None:
    scope = Scope(**{name: SCOPE_FILTERS[name][0] for name in chosen})
    given = {SCOPE_FILTERS[n][1]: SCOPE_FILTERS[n][2] for n in chosen if n != "agent_source"}
    given_all = given | ({"agent_source": "="} if "agent_source" in chosen else {})

    def run(conn: psycopg.Connection) -> None:
        store = SearchStore(conn)
        store.candidates(scope=scope, match="'order'", weights={"order": 1.0}, avg_len=5.0, k1=1.2, b=0.75,
                         pool=300, expected=expected)
        store.hits(scope=scope, keys=[(conn.sid, 1)], required="'order'")  # type: ignore[attr-defined]

    called, hits = explain_recorded(recorded, run)
    assert any(n.get("Function Name") == "mm_search_candidates" for n in nodes(called)), called
    check_plan(hits, given_all)
    newest = expected is not None
    for scoped in (False, True):  # the owner, a token of one project: the same use of the indexes
        candidates = candidate_plan(recorded, scope, newest=newest, scoped=scoped)
        check_plan(candidates, given_all | ({"project_id": "= ANY"} if scoped else {}))
        assert "message_search" in relations(candidates)
        if not newest and not chosen:  # a rare word in every project: the GIN index finds the rows, for a token too
            assert any("tsv @@ $1" in q for q in quals(candidates, ("Index Cond", "Recheck Cond"))), quals(candidates)


def test_search_segments_and_echoes(recorded) -> None:
    scope = Scope(segments=[(recorded.sid, 0, 3)], echoes=True)

    def run(conn: psycopg.Connection) -> None:
        store = SearchStore(conn)
        store.candidates(scope=scope, match="'order'", weights={"order": 1.0}, avg_len=5.0, k1=1.2, b=0.75, pool=300)
        store.hits(scope=scope, keys=[(conn.sid, 1)], required=None)  # type: ignore[attr-defined]

    plans = explain_recorded(recorded, run)[1:] + [candidate_plan(recorded, scope, newest=False, scoped=True)]
    for plan in plans:
        check_plan(plan, {})
        assert not any("echo" in q for q in quals(plan)), "echoes included: no echo condition"


@pytest.mark.parametrize("project", [None, "plans"])
def test_search_statistics_and_backlog(recorded, project) -> None:
    def run(conn: psycopg.Connection) -> None:
        store = SearchStore(conn)
        store.term_stats(project, ["order", "payment"])
        store.pending_sessions(project, 10)
        store.pending_sessions(project, 10, untracked=True)
        store.sessions_after(project, "", 10)
        store.backlog(project)

    plans = explain_recorded(recorded, run)
    assert len(plans) == 6
    for plan in plans:
        check_plan(plan, {"project_id": "="} if project else {})


DECISION_FILTERS = {  # params key → (value, column, operator)
    "project_id": ("plans", "project_id", "="),
    "agent_source": ("claude-code", "agent_source", "="),
    "session_id": (None, "session_id", "="),
    "decision_type": ("architecture", "decision_type", "="),
    "since": (SINCE, "created_at", ">="),
    "until": (UNTIL, "created_at", "<"),
}


@pytest.mark.parametrize("chosen", [(), *((name,) for name in DECISION_FILTERS), tuple(DECISION_FILTERS)])
@pytest.mark.parametrize("keyword", [False, True])
def test_decision_search(recorded, chosen, keyword) -> None:
    params: dict[str, Any] = {name: None for name in DECISION_FILTERS} | {
        "status": None, "limit": 10, "terms": [], "weights": [], "match": None, "like": None, "exclude": None}
    for name in chosen:
        value = DECISION_FILTERS[name][0]
        params[name] = recorded.sid if name == "session_id" else value
    if keyword:
        params.update(terms=["queue"], weights=[1.0], match="'queue'", like="%queue%")
    plans = explain_recorded(recorded, lambda conn: MemoryStore(conn).search_decisions(params))
    check_plan(plans[0], {DECISION_FILTERS[n][1]: DECISION_FILTERS[n][2] for n in chosen},
               indexed=("project_id",) if chosen == ("project_id",) else ())


@pytest.mark.parametrize("key", [None, "plan"])
def test_context_reads(recorded, key) -> None:
    plans = explain_recorded(recorded, lambda conn: MemoryStore(conn).current_context(conn.sid, key))
    check_plan(plans[0], {"session_id": "="} | ({"key": "="} if key else {}), indexed=("session_id",))


SESSION_FILTERS: dict[str, Any] = {"project_id": "plans", "agent_source": "claude-code", "cursor": (UNTIL, "ses_z")}


@pytest.mark.parametrize("chosen", list(combinations(list(SESSION_FILTERS))))
def test_session_lists(recorded, chosen) -> None:
    kwargs = {name: SESSION_FILTERS[name] if name in chosen else None for name in SESSION_FILTERS}
    plans = explain_recorded(recorded, lambda conn: Store(conn).list_sessions(limit=10, **kwargs))
    given = {name: "=" for name in chosen if name != "cursor"}
    check_plan(plans[0], given, indexed=tuple(given) if len(given) == 1 else ())
    if "cursor" in chosen:
        assert any("< ROW($" in q for q in quals(plans[0])), quals(plans[0])


@pytest.mark.parametrize("chosen", [(), ("project_id",), ("agent_source",), ("since",), ("until",),
                                    ("project_id", "agent_source", "host", "since", "until")])
def test_ui_session_list(recorded, chosen) -> None:
    values: dict[str, Any] = {"project_id": "plans", "agent_source": "claude-code", "host": "laptop", "since": SINCE, "until": UNTIL}
    f = SessionFilter(**{name: values[name] for name in chosen})
    plans = explain_recorded(recorded, lambda conn: UiStore(conn).sessions(f))
    given = {name: "=" for name in chosen if name in ("project_id", "agent_source")}
    check_plan(plans[0], given)


def test_a_catch_all_is_caught(recorded) -> None:
    """The check itself: the catch-all form these queries had is found in its generic plan."""
    plan = generic_plan(recorded, "SELECT * FROM sessions WHERE (%(p)s::text IS NULL OR project_id = %(p)s)",
                        {"p": "plans"})
    with pytest.raises(AssertionError):
        check_plan(plan, {"project_id": "="})


@pytest.mark.parametrize("chosen", [(), *((name,) for name in SCOPE_FILTERS), tuple(SCOPE_FILTERS)])
def test_semantic_nearest(recorded, chosen) -> None:
    store = EmbeddingStore(recorded)
    if not store.available():
        pytest.skip("pgvector is not installed on this server")
    store.register_model("plans-model", 3)
    recorded.commit()
    scope = Scope(**{name: SCOPE_FILTERS[name][0] for name in chosen})
    plans = explain_recorded(recorded, lambda conn: EmbeddingStore(conn).nearest(
        scope=scope, model="plans-model", dim=3, query=[0.1, 0.2, 0.3], pool=10))
    check_plan(plans[-1], {SCOPE_FILTERS[n][1]: SCOPE_FILTERS[n][2] for n in chosen})


# the per-session hot queries on the partitioned tables (migration 0021): only the session's own
# month partition is in the generic plan (the others removed at executor start, migration 0027),
# whatever the number of months
SESSION_QUERIES: dict[str, dict[str, Any]] = {
    "messages_read_range": {"after_seq": 0, "upper": 10, "limit": 100},
    "search_unindexed_messages": {"after_seq": 0, "up_to_seq": 10, "limit": 100},
    "search_earlier_calls": {"before_seq": 3, "lookback": 200, "ids": ["call_1"]},
    "archive_export_page": {"after_seq": 0, "up_to_seq": 10, "limit": 100},
    "session_lock": {"append_ids": ["a1"]},
    "embed_session_messages": {"after_seq": 0, "up_to_seq": 10, "limit": 100},
}


def partition_scans(plan: dict[str, Any], table: str) -> tuple[int, int]:
    """(partitions of `table` the plan names or pruned at start-up, partitions left in it after
    start-up: opened and locked, even where run-time pruning then skips them)."""
    named = [n for n in nodes(plan) if n.get("Relation Name", "").startswith(f"{table}_p")
             or n.get("Relation Name") == f"{table}_default"]
    removed = sum(n.get("Subplans Removed", 0) for n in nodes(plan))
    return len(named) + removed, len(named)


@pytest.mark.parametrize("name", list(SESSION_QUERIES))
def test_per_session_queries_read_one_month_partition(recorded, name) -> None:
    from mcp_memory.store.sql import q

    conn = recorded
    month = conn.execute("SELECT part_month FROM sessions WHERE session_id = %s", (conn.sid,)).fetchone()[0]
    conn.execute("SELECT mm_ensure_partitions(3)")  # this month and three ahead: four partitions at least
    params = {"session_id": conn.sid, "part_month": month, **SESSION_QUERIES[name]}
    text = q(name) if isinstance(q(name), str) else q(name).as_string(conn)
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    numbered = PLACEHOLDER.sub(number, text.rstrip().rstrip(";"))
    types = [sql_type(params[key]) for key in order]
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute(f"PREPARE one({', '.join(types)}) AS {numbered}")
    args = sql.SQL(", ").join(sql.SQL("{}::" + t).format(sql.Literal(params[key])) for key, t in zip(order, types, strict=True))
    plan = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE one({})").format(args)).fetchone()[0][0]["Plan"]
    conn.rollback()
    partitions, kept = partition_scans(plan, "messages")
    assert partitions >= 4, (name, partitions)  # the plan had months to choose from
    assert kept <= 1, (name, kept, plan)  # and kept one at most: the session's own


# Nested statements: the plans auto_explain logs for every statement a per-session operation runs,
# the write functions' own statements among them, as generic plans (plan_cache_mode =
# force_generic_plan; plpgsql's cached plans follow it too). A month partition left in such a plan
# is opened and locked at executor start even when run-time pruning skips it later: each per-session
# plan may keep one partition of each month table, the session's own (migration 0027).
AUTO_EXPLAIN = ("LOAD 'auto_explain'", "SET auto_explain.log_nested_statements = on",
                "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_analyze = on",
                "SET auto_explain.log_format = json", "SET auto_explain.log_level = notice",
                "SET plan_cache_mode = force_generic_plan")
NESTED = ("m.append_id = p_append_ids[i]",  # mm_append's lookup of a replayed append_id
          "JOIN messages m ON m.session_id = p_session_id",  # mm_index_messages
          "DELETE FROM message_search WHERE session_id = p_session_id")  # mm_forget_session_index


def months_back(n: int) -> date:
    today = datetime.now(UTC).date()
    index = today.year * 12 + today.month - 1 - n
    return date(index // 12, index % 12 + 1, 1)


def month_partitions(dsn: str) -> dict[str, str]:
    """Every partition of the month tables → its table, with two past months added: ≥ 7 each."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for month in (months_back(2), months_back(1)):
            conn.execute("SELECT mm_add_month_partition(t, %s) FROM unnest(mm_partitioned_tables()) AS t"
                         " WHERE mm_month_partition(t, %s) IS NULL", (month, month))
        rows = conn.execute("SELECT c.relname, p.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                            " JOIN pg_class p ON p.oid = i.inhparent"
                            " WHERE p.relname = ANY(mm_partitioned_tables())").fetchall()
    return dict(rows)


def per_session_operations(conn: psycopg.Connection, sid: str) -> None:
    """What appending, indexing, searching, reading and archiving one session runs in the store."""
    payloads = [{"role": "user", "content": f"order payment timeout {i}"} for i in range(3)]
    rows = [NewMessage(i + 1, f"a{i}", "user", canonical_json(p).decode(), hashlib.sha256(canonical_json(p)).digest(),
                       None) for i, p in enumerate(payloads)]
    for _ in range(2):  # the second time, every append_id is a replay
        Store(conn).lock_session(sid, [r.append_id for r in rows])
        Store(conn).append_many(sid, rows)
        conn.commit()
    search = SearchStore(conn)
    mark = search.lock_session_index(sid)
    assert mark is not None
    stored = search.unindexed_messages(sid, after_seq=0, up_to_seq=mark.last_seq, limit=100)
    search.earlier_calls(sid, before_seq=2, ids=["call_1"], lookback=200)
    search.index_pass(sid, [IndexRow(r.seq, r.role, r.created_at, index_message(r.payload)) for r in stored],
                      indexed_seq=mark.last_seq)
    conn.commit()
    scope = Scope(segments=[(sid, 0, 2**62)])
    for expected in (None, NEWEST_ABOVE + 1):
        search.candidates(scope=scope, match="'order'", weights={"order": 1.0}, avg_len=5.0, k1=1.2, b=0.75,
                          pool=300, expected=expected)
    search.hits(scope=scope, keys=[(sid, 1), (sid, 2)], required="'order'")
    segment = Store(conn).lineage(sid)[0]
    Store(conn).read_range(segment, after_seq=0, limit=100)
    ArchiveStore(conn).export_page(sid, after_seq=0, up_to_seq=3, limit=100, max_bytes=10**6)
    EmbeddingStore(conn).session_messages(PendingSession(sid, "plans", 3, 0), 100)
    search.forget_session(sid)
    conn.commit()


def test_nested_per_session_statements_keep_one_month_partition(fresh_db: str) -> None:
    partitions = month_partitions(fresh_db)
    assert sum(1 for t in partitions.values() if t == "messages") >= 5
    sid = old_session(fresh_db, "plans", months_back(2))
    notices: list[str] = []
    with psycopg.connect(fresh_db) as conn:
        try:
            for setting in AUTO_EXPLAIN:
                conn.execute(setting)
        except psycopg.Error as exc:  # the embedded server's build has no auto_explain; it needs a superuser
            pytest.skip(f"auto_explain is not available here: {exc}")
        conn.commit()
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        per_session_operations(conn, sid)
    seen: list[str] = []
    wide: list[tuple[str, int, str]] = []  # (table, partitions kept, statement)
    for notice in notices:
        logged = json.loads(notice[notice.index("{"):]) if "{" in notice else None
        if not logged or "Plan" not in logged:
            continue
        read = [partitions[n["Relation Name"]] + ":" + n["Relation Name"] for n in nodes(logged["Plan"])
                if n.get("Relation Name") in partitions]
        if read or any("Subplans Removed" in n for n in nodes(logged["Plan"])):
            seen.append(logged["Query Text"])
        for table in sorted(set(partitions.values())):
            kept = {r for r in read if r.startswith(table + ":")}
            if len(kept) > 1:
                wide.append((table, len(kept), " ".join(logged["Query Text"].split())[:300]))
    assert not wide, "\n".join(map(str, wide))
    for text in NESTED:
        assert any(text in q for q in seen), (text, seen)
    assert len(seen) >= 12, seen  # the store's statements too: lock, reads, search, export, embeddings
