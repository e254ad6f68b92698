"""Storage for semantic search: models, the per-session watermark (the queue), vectors and the
nearest-neighbour query. Only store/ touches psycopg; vectors travel as pgvector text literals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from ..search.tokenizer import CJK_RANGES
from .filters import composed, conditions, project_only
from .search_store import Scope, segment_months
from .sql import q

HNSW_EF_SEARCH = 100


@dataclass(frozen=True)
class PendingSession:
    session_id: str
    project_id: str
    last_seq: int
    done_seq: int


@dataclass(frozen=True)
class PendingMessage:
    seq: int
    payload: dict[str, Any]


@dataclass(frozen=True)
class EmbeddingRow:
    seq: int
    vector: list[float]


@dataclass(frozen=True)
class Nearest:
    session_id: str
    seq: int
    distance: float
    cjk: bool = False  # most of its index terms are CJK (hybrid search compares it with its own script)


_CJK_TERM = f"^[{CJK_RANGES}]"  # a PostgreSQL regular expression: an index term of CJK text


def vector_literal(values: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


class EmbeddingStore:
    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def _all(self, query: str | sql.Composed, params: dict[str, Any]) -> list[dict[str, Any]]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(query, params, prepare=False).fetchall()

    def available(self) -> bool:
        """Whether the server has pgvector and migration 0005 could create message_embeddings."""
        return bool(self._all(q("embed_table_exists"), {})[0]["present"])

    def model_dim(self, model: str) -> int | None:
        rows = self._all(q("embed_model_get"), {"model": model})
        return rows[0]["dim"] if rows else None

    def register_model(self, model: str, dim: int) -> int:
        """Record the model (first use creates its HNSW index); returns the dimension on record."""
        return int(self._all(q("embed_model_add"), {"model": model, "dim": dim})[0]["dim"])

    def pending_sessions(self, model: str, project_id: str | None, limit: int) -> list[PendingSession]:
        rows = self._all(composed("embed_pending_sessions", project=project_only("s.project_id", project_id)),
                         {"model": model, "project_id": project_id, "limit": limit})
        return [PendingSession(r["session_id"], r["project_id"], r["last_seq"], r["done_seq"]) for r in rows]

    def session_messages(self, pending: PendingSession, limit: int) -> list[PendingMessage]:
        rows = self._all(q("embed_session_messages"), {
            "session_id": pending.session_id, "after_seq": pending.done_seq, "up_to_seq": pending.last_seq,
            "limit": limit})
        return [PendingMessage(r["seq"], r["payload"]) for r in rows]

    def store(self, pending: PendingSession, model: str, rows: Sequence[EmbeddingRow], done_seq: int) -> None:
        """Store vectors and move the watermark, in the caller's transaction."""
        self.conn.execute(q("embed_store"), {
            "session_id": pending.session_id, "model": model, "seqs": [r.seq for r in rows],
            "kinds": ["message"] * len(rows), "vectors": [vector_literal(r.vector) for r in rows],
            "done_seq": done_seq})

    def counts(self, model: str, project_id: str | None) -> tuple[int, int]:
        """(vectors stored, messages past the watermark) for the model."""
        query = composed("embed_counts", project_e=project_only("e.project_id", project_id),
                         project_s=project_only("s.project_id", project_id))
        row = self._all(query, {"model": model, "project_id": project_id})[0]
        return int(row["vectors"]), int(row["pending"])

    def has_vectors(self, model: str, project_id: str | None) -> bool:
        query = composed("embed_any", project=project_only("e.project_id", project_id))
        return bool(self._all(query, {"model": model, "project_id": project_id})[0]["present"])

    def nearest(self, *, scope: Scope, model: str, dim: int, query: Sequence[float], pool: int) -> list[Nearest]:
        self.conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(HNSW_EF_SEARCH)))
        self.conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        statement = composed("embed_nearest", dim=sql.Literal(dim), filters=nearest_filters(scope))
        params = {**scope.params(), "model": model, "query": vector_literal(query), "pool": pool, "cjk": _CJK_TERM}
        return [Nearest(r["session_id"], r["seq"], float(r["distance"]), bool(r["cjk"]))
                for r in self._all(statement, params)]


def nearest_filters(scope: Scope) -> sql.Composable:
    """The filters of embed_nearest given by the scope: the project on the vectors, the others on
    the message's search row (message_search `m`), only when one of them is given."""
    on_message = conditions([
        (scope.since is not None, "m.created_at >= %(since)s"),
        (scope.until is not None, "m.created_at < %(until)s"),
        (scope.agent_source is not None,
         "m.session_id IN (SELECT session_id FROM sessions WHERE agent_source = %(agent_source)s)"),
        (scope.segments is not None,
         "EXISTS (SELECT 1 FROM unnest(%(seg_sessions)s::text[], %(seg_lower)s::bigint[], %(seg_upper)s::bigint[])"
         " AS g(sid, lo, hi) WHERE g.sid = m.session_id AND m.seq > g.lo AND m.seq <= g.hi)"),
        segment_months("m", scope.segments),
    ])
    message_given = any(v is not None for v in (scope.since, scope.until, scope.agent_source, scope.segments))
    return conditions([
        (scope.project_id is not None, "x.project_id = %(project_id)s"),
        segment_months("x", scope.segments),  # the vectors of the lineage's months only
        (message_given, sql.SQL("EXISTS (SELECT 1 FROM message_search m WHERE m.session_id = x.session_id"
                                " AND m.seq = x.seq AND {})").format(on_message)),
    ])
