"""Search modes (README, design note 6): `fts` (BM25), `semantic` (nearest vectors of the query,
pgvector) and `hybrid` (both on one scale). The ranking itself is the retrieval pipeline
(mcp_memory/retrieval/pipeline.py, tuned by one `Tuning` value); this module checks the arguments,
chooses the mode and embeds the question.

Without a mode, hybrid runs when the project has vectors of the configured model, else full text,
silently. A mode asked for that cannot run falls back to full text and says why in `note`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ..embeddings.providers import Provider
from ..errors import Invalid, Unavailable
from ..memory_results import MatchList, SearchMode
from ..retrieval import pipeline
from ..retrieval.candidates import Ask
from ..retrieval.lexical import cross_language
from ..retrieval.tuning import DEFAULT, Tuning
from ..search.query import parse
from ..store.db import Database
from ..store.embedding_store import EmbeddingStore
from ..store.search_store import SearchStore
from .search import check_limit, check_query, check_scope, check_time, with_session

MODES: tuple[SearchMode, ...] = ("fts", "semantic", "hybrid")


@dataclass(frozen=True)
class Plan:
    mode: SearchMode
    note: str | None = None


def check_mode(mode: Any) -> SearchMode | None:
    if mode is None or mode == "":
        return None
    if mode not in MODES:
        raise Invalid("mode must be one of " + ", ".join(MODES))
    return mode


def search(
    db: Database, query: Any, *, embedder: Provider | None = None, mode: Any = None, session_id: str | None = None,
    limit: Any = 10, hits_only: bool = False, include_echoes: bool = False, now: Any = None,
    tuning: Tuning = DEFAULT, **filters: Any,
) -> MatchList:
    """filters: project_id, agent_source, role, since, until. hits_only: leave out the turns that are
    there only as the context of a neighbouring hit. include_echoes: also the turns that echo
    mcp-memory's own tools. now: the time "last month" of the question counts from (default: now)."""
    text = check_query(query)
    limit = check_limit(limit)
    scope = replace(check_scope(**filters), echoes=include_echoes is True)
    plan = plan_mode(db, embedder, check_mode(mode), scope.project_id)
    moment = check_time(now, "now") or datetime.now(UTC)
    vector = None
    if plan.mode != "fts" and embedder is not None:
        try:
            vector = embedder.embed([text])[0]
        except Unavailable as exc:
            plan = Plan("fts", f"{plan.mode} search failed ({exc}); these are full-text results")
    with db.transaction() as conn:
        store = SearchStore(conn)
        scope = with_session(conn, scope, session_id)
        parsed = cross_language(store, scope, parse(text, store.synonym_groups()), tuning)
        ask = Ask(store=store, vectors=EmbeddingStore(conn) if vector is not None else None, scope=scope,
                  parsed=parsed, text=text, mode=plan.mode, embedder=embedder if vector is not None else None,
                  vector=vector, now=moment, limit=limit, hits_only=hits_only is True, tuning=tuning)
        matches = pipeline.run(ask)
    return MatchList(matches=matches, mode=plan.mode, note=plan.note)


def plan_mode(db: Database, embedder: Provider | None, requested: SearchMode | None,
              project_id: str | None) -> Plan:
    if requested == "fts":
        return Plan("fts")
    reason = semantic_unavailable(db, embedder, project_id)
    if reason is None:
        return Plan(requested or "hybrid")
    return Plan("fts", None if requested is None else f"{requested} search is unavailable: {reason}; "
                                                        "these are full-text results")


def semantic_unavailable(db: Database, embedder: Provider | None, project_id: str | None) -> str | None:
    """Why semantic search cannot run for this project, or None when it can."""
    if embedder is None:
        return "no embedding provider is configured ([embeddings] in the config file)"
    with db.transaction() as conn:
        store = EmbeddingStore(conn)
        if not store.available():
            return "pgvector is not installed on the PostgreSQL server"
        if not store.has_vectors(embedder.name, project_id):
            return f"no embeddings of model {embedder.name} yet (run `mcp-memory embed --once`)"
    return None
