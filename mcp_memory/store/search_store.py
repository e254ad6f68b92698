"""Storage for search: the message index, BM25 statistics, candidate scoring, synonyms.

Only store/ touches psycopg. The filters of the search statements are composed per call
(filters.py): only the given ones, so that the planner uses the index of each and, on a
partitioned table, prunes by it. The statements run unprepared (`prepare=False`): the candidate
plan depends on the words asked (a rare word: the GIN index; a common one: newest first).
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import sql

from ..search.index import IndexedText
from ..search.ranking import TermStats
from .filters import Condition, composed, conditions, project_only
from .sql import Statements, first_row, q, scalar

SHARDS = 8
# A query whose terms match more rows than NEWEST_ABOVE in its scope (the BM25 statistics say how
# many) takes its newest matches as candidates: ranking every row holding a common word grows with
# the corpus (README, "Growth"). Below it, every match is ranked, as the relevance tuning assumes.
NEWEST_ABOVE = 2_000
_SEGMENT = ("EXISTS (SELECT 1 FROM unnest(%(seg_sessions)s::text[], %(seg_lower)s::bigint[], %(seg_upper)s::bigint[])"
            " AS g(sid, lo, hi) WHERE g.sid = {t}.session_id AND {t}.seq > g.lo AND {t}.seq <= g.hi)")
# Up to this many segments (a fork lineage's depth), their months are named one by one (segment_months)
SEGMENT_MONTHS_MAX = 64


def segment_months(table: str, segments: Sequence[tuple[str, int, int]] | None) -> Condition:
    """`table`.part_month among the months of the segments' sessions, each one a call of
    mm_session_month (migration 0027): an ARRAY of such calls is evaluated at executor start, which
    removes the other month partitions from a generic plan before they are opened (`= ANY` of one
    array-valued expression would not prune). Not given without segments, or past
    SEGMENT_MONTHS_MAX of them (the session filter alone then applies, as before)."""
    count = len(segments) if segments is not None else 0
    if not 0 < count <= SEGMENT_MONTHS_MAX:
        return False, "TRUE"
    months = sql.SQL(", ").join(sql.SQL("mm_session_month((%(seg_sessions)s::text[])[{}])").format(sql.Literal(i))
                                for i in range(1, count + 1))
    return True, sql.SQL("{}.part_month = ANY(ARRAY[{}])").format(sql.Identifier(table), months)


def shard_of(session_id: str) -> int:
    return zlib.crc32(session_id.encode()) % SHARDS


@dataclass(frozen=True)
class IndexRow:
    seq: int
    role: str
    created_at: datetime | None
    doc: IndexedText
    echo: bool = False  # the turn echoes mcp-memory's own tools (scaffolding.py)


@dataclass(frozen=True)
class Watermark:
    project_id: str
    last_seq: int
    indexed_seq: int


@dataclass(frozen=True)
class StoredText:
    """What indexing needs of a stored message."""

    seq: int
    role: str
    payload: dict[str, Any]
    created_at: datetime | None


@dataclass(frozen=True)
class Scope:
    """Filters shared by candidate search and hit fetching; segments = fork lineage of one session."""

    project_id: str | None = None
    agent_source: str | None = None
    role: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    segments: list[tuple[str, int, int]] | None = None
    echoes: bool = False  # include turns that echo mcp-memory's own tools

    def params(self) -> dict[str, Any]:
        segs = self.segments
        return {
            "echoes": self.echoes, "project_id": self.project_id, "agent_source": self.agent_source, "role": self.role,
            "since": self.since, "until": self.until,
            "seg_sessions": [s[0] for s in segs] if segs is not None else None,
            "seg_lower": [s[1] for s in segs] if segs is not None else None,
            "seg_upper": [s[2] for s in segs] if segs is not None else None,
        }

    def hit_filters(self, *, required: bool) -> sql.Composable:
        """The same conditions on the rows shown (message_search `ms`, sessions `s`, messages `m`)."""
        return conditions([
            (required, "ms.tsv @@ %(required)s::tsquery"),
            (not self.echoes, "NOT ms.echo"),
            (self.project_id is not None, "ms.project_id = %(project_id)s"),
            (self.role is not None, "ms.role = %(role)s"),
            (self.since is not None, "ms.created_at >= %(since)s"),
            (self.until is not None, "ms.created_at < %(until)s"),
            (self.agent_source is not None, "s.agent_source = %(agent_source)s"),
            (self.segments is not None, _SEGMENT.format(t="ms")),
            segment_months("ms", self.segments),
            segment_months("m", self.segments),
        ])


@dataclass(frozen=True)
class Candidate:
    session_id: str
    seq: int
    created_at: datetime
    score: float


class SearchStore(Statements):
    prepare = False  # see the module docstring

    # indexing (core/indexer.py, after the append committed) ---------------------------------------
    def index_pass(self, session_id: str, rows: Sequence[IndexRow], *, indexed_seq: int) -> None:
        """Store the index rows of one session, add them to the BM25 statistics and move its
        watermark to `indexed_seq`, in one database call (the caller holds the indexing lock)."""
        df = Counter(term for row in rows for term in row.doc.terms)
        terms = sorted(df)  # sorted: two passes lock shared statistics rows in the same order
        self.conn.execute(q("search_index_pass"), {
            "session_id": session_id, "seqs": [r.seq for r in rows], "doc_lens": [r.doc.length for r in rows],
            "tsvs": [r.doc.tsv for r in rows], "terms": terms, "dfs": [df[t] for t in terms],
            "shard": shard_of(session_id), "indexed_seq": indexed_seq, "echoes": [r.echo for r in rows]})

    def lock_session_index(self, session_id: str) -> Watermark | None:
        """Take the session's indexing turn (until the transaction ends); None: no such session."""
        self.conn.execute(q("search_index_lock"), {"session_id": session_id})
        row = self.conn.execute(q("search_watermark"), {"session_id": session_id}).fetchone()
        return Watermark(*row) if row else None

    def unindexed_messages(self, session_id: str, *, after_seq: int, up_to_seq: int, limit: int) -> list[StoredText]:
        rows = self.conn.execute(q("search_unindexed_messages"), {
            "session_id": session_id, "after_seq": after_seq, "up_to_seq": up_to_seq, "limit": limit}).fetchall()
        return [StoredText(*row) for row in rows]

    def earlier_calls(self, session_id: str, *, before_seq: int, ids: Sequence[str], lookback: int) -> dict[str, str]:
        """call id → function name, for the given ids among the session's last `lookback` tool calls
        up to `before_seq`."""
        rows = self.conn.execute(q("search_earlier_calls"), {
            "session_id": session_id, "before_seq": before_seq, "ids": list(ids), "lookback": lookback}).fetchall()
        return {row[0]: row[1] for row in rows if isinstance(row[1], str)}

    def pending_sessions(self, project_id: str | None, limit: int, *, untracked: bool = False) -> list[str]:
        """Sessions whose index is behind; `untracked` also finds those without a progress row
        (restored ones), at the price of a scan of all sessions."""
        name = "search_untracked_sessions" if untracked else "search_pending_sessions"
        column = "s.project_id" if untracked else "project_id"
        rows = self.conn.execute(composed(name, project=project_only(column, project_id)),
                                 {"project_id": project_id, "limit": limit}).fetchall()
        return [row[0] for row in rows]

    def forget_session(self, session_id: str) -> None:
        """Drop the session's index rows and their statistics; its watermark goes back to the start."""
        self.conn.execute(q("search_forget_session"), {"session_id": session_id, "shard": shard_of(session_id)})

    def sessions_after(self, project_id: str | None, after: str, limit: int) -> list[str]:
        rows = self.conn.execute(composed("search_all_sessions", project=project_only("project_id", project_id)),
                                 {"project_id": project_id, "after": after, "limit": limit}).fetchall()
        return [row[0] for row in rows]

    def backlog(self, project_id: str | None) -> tuple[int, int]:
        """(sessions, messages) stored but not indexed yet."""
        query = composed("search_backlog", project=project_only("project_id", project_id))
        row = first_row(self.conn.execute(query, {"project_id": project_id}).fetchone(), "search_backlog")
        return row[0], row[1]

    # querying -----------------------------------------------------------------------------------
    def term_stats(self, project_id: str | None, terms: Sequence[str]) -> TermStats:
        params = {"project_id": project_id, "terms": list(terms)}
        project = project_only("project_id", project_id)
        totals = self._rows(composed("search_doc_totals", project=project), params)[0]
        df = ({row["term"]: row["df"] for row in self._rows(composed("search_term_df", project=project), params)}
              if terms else {})
        return TermStats(docs=totals["docs"], total_len=totals["total_len"], df=df)

    def candidates(
        self, *, scope: Scope, match: str, weights: dict[str, float], avg_len: float, k1: float, b: float, pool: int,
        expected: int | None = None,
    ) -> list[Candidate]:
        """`expected`: how many rows the match holds in the scope by the statistics (the sum of the
        matching terms' document frequencies); above NEWEST_ABOVE the `pool` newest are the candidates.
        The scan runs in mm_search_candidates (migration 0030): as a token, under row-level security,
        the planner could not use the GIN index for the match."""
        terms = sorted(weights)
        params = {**scope.params(), "match": match, "terms": terms, "weights": [weights[t] for t in terms],
                  "avg_len": avg_len, "k1": k1, "b": b, "pool": pool,
                  "newest": expected is not None and expected > NEWEST_ABOVE}
        return [Candidate(r["session_id"], r["seq"], r["created_at"], float(r["score"]))
                for r in self._rows(q("search_candidates"), params)]

    def hits(self, *, scope: Scope, keys: Sequence[tuple[str, int]], required: str | None) -> list[dict[str, Any]]:
        params = {**scope.params(), "sessions": [k[0] for k in keys], "seqs": [k[1] for k in keys],
                  "required": required}
        return self._rows(composed("search_hits", scope=scope.hit_filters(required=required is not None)), params)

    # synonyms -----------------------------------------------------------------------------------
    def synonym_groups(self) -> list[list[str]]:
        return [row["terms"] for row in self._all("synonym_groups", {})]

    def add_synonyms(self, terms: Sequence[str]) -> None:
        found = self._all("synonym_find", {"terms": list(terms)})
        groups = sorted({row["group_id"] for row in found})
        group_id = groups[0] if groups else scalar(self.conn, q("synonym_new_group"), what="synonym_new_group")
        if len(groups) > 1:
            self.conn.execute(q("synonym_merge"), {"group_id": group_id, "groups": groups[1:]})
        self.conn.execute(q("synonym_insert"), {"group_id": group_id, "terms": list(terms)})

    def remove_synonyms(self, terms: Sequence[str]) -> list[str]:
        return [row["term"] for row in self._all("synonym_remove", {"terms": list(terms)})]
