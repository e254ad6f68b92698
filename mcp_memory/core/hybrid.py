"""Search modes (README, design note 6): `fts` (BM25, core/search.py), `semantic` (nearest vectors of
the query, pgvector) and `hybrid` (both scores normalised and added, see `combine`). Recency and
dates are applied to the final score as in full-text search, and every mode honours the same filters.

The vector side may only add to full text, so it is calibrated per query: it counts less the surer
full text is (`vector_weight`: lexical confidence, and the share of the query in scripts the model
knows), and only the part of the nearest pool that stands out of the pool's typical similarity
moves the ranking (`above_typical`). The constants were chosen on the tuning parts of
scripts/bench/search_quality.py; the held-out parts are what the README reports.

Without a mode, hybrid runs when the project has vectors of the configured model, else full text,
silently. A mode asked for that cannot run falls back to full text and says why in `note`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ..embeddings.providers import Provider
from ..errors import Invalid, Unavailable
from ..memory_results import MatchList, SearchMode
from ..search import ranking
from ..search.query import parse
from ..store.db import Database
from ..store.embedding_store import EmbeddingStore, Nearest
from ..store.search_store import Scope, SearchStore
from . import second_hop, temporal
from .search import (
    Hits,
    Lexical,
    check_limit,
    check_query,
    check_scope,
    check_time,
    cross_language,
    fetch_matches,
    fts_scores,
    lexical_own,
    with_session,
)

MODES: tuple[SearchMode, ...] = ("fts", "semantic", "hybrid")
VECTOR_WEIGHT = 1.0  # the nearest vector against the best word match (1); constants chosen on the tuning parts
VECTOR_POOL = 200  # nearest message vectors fetched
VECTOR_FLOOR = 0.3  # share of VECTOR_WEIGHT left when full text is sure (vector_weight)
VECTOR_BASE = 0.5  # quantile of the pool that scales to 0 (0.0: the farthest fetched)
PER_SCRIPT_BASE = True  # CJK turns and the others each measured against their own typical similarity
SCRIPT_GROUP_MIN = 10  # turns of each group in the pool for that (`above_typical`)


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
    limit: Any = 10, hits_only: bool = False, include_echoes: bool = False, now: Any = None, **filters: Any,
) -> MatchList:
    """filters: project_id, agent_source, role, since, until. hits_only: leave out the turns that are
    there only as the context of a neighbouring hit. include_echoes: also the turns that echo
    mcp-memory's own tools. now: the time "last month" of the question counts from (default: now)."""
    text = check_query(query)
    limit = check_limit(limit)
    scope = replace(check_scope(**filters), echoes=include_echoes is True)
    plan = plan_mode(db, embedder, check_mode(mode), scope.project_id)
    vector = None
    if plan.mode != "fts" and embedder is not None:
        try:
            vector = embedder.embed([text])[0]
        except Unavailable as exc:
            plan = Plan("fts", f"{plan.mode} search failed ({exc}); these are full-text results")
    with db.transaction() as conn:
        store = SearchStore(conn)
        scope = with_session(conn, scope, session_id)
        parsed = cross_language(store, scope, parse(text, store.synonym_groups()))
        lexical = fts_scores(store, parsed, scope) if plan.mode != "semantic" else Lexical({}, 0.0)
        near = _nearest(EmbeddingStore(conn), scope, embedder, vector) if vector is not None else []
        weight = vector_weight(text, getattr(embedder, "scripts", None), lexical.confidence)
        hits = Hits(words=lexical.own, meaning=vector_hits(plan.mode, near))
        scores = combine(plan.mode, lexical.scores, near, weight)
        if plan.mode == "hybrid":  # full text's scores hold the second hop already (core/second_hop.py)
            scores = second_hop.interleave(scores, lexical.hop)
        when = Timed(EmbeddingStore(conn), store, scope, plan.mode, embedder if vector is not None else None)
        found = when.second_stage(text, check_time(now, "now") or datetime.now(UTC), vector, hits)
        if found is not None:
            hits = found.hits
        matches = fetch_matches(store, scope, parsed, scores, limit, hits=hits, hits_only=hits_only is True,
                                window=found.window if found else None, inside=found.scores if found else None,
                                share=found.share if found else 1.0)
    return MatchList(matches=matches, mode=plan.mode, note=plan.note)


@dataclass(frozen=True)
class SecondStage:
    window: temporal.Window
    scores: dict[ranking.Key, float]
    hits: Hits
    share: float  # of the first stage's scores (`temporal.merge`)


@dataclass(frozen=True)
class Timed:
    """The time-anchored second stage (core/temporal.py) in the mode of the first."""

    vectors: EmbeddingStore
    store: SearchStore
    scope: Scope
    mode: SearchMode
    embedder: Provider | None

    def second_stage(self, text: str, now: datetime, vector: list[float] | None, hits: Hits) -> SecondStage | None:
        """When the question names a period or an event: the window, the ranking inside it, and
        the hits of both stages (for the labels)."""
        found = temporal.focus(self.store, self.scope, text, now, self.event_scores)
        if found is None:
            return None
        inner = temporal.window_scope(self.scope, found.window)
        parsed = cross_language(self.store, inner, temporal.parsed_focus(self.store, found))
        lexical = fts_scores(self.store, parsed, inner) if self.mode != "semantic" else Lexical({}, 0.0)
        if found.anchored and vector is not None and self.embedder is not None:
            try:  # the question without the event's words ("before the migration")
                vector = self.embedder.embed([found.query])[0]
            except Unavailable:
                pass
        near = _nearest(self.vectors, inner, self.embedder, vector) if vector is not None else []
        weight = vector_weight(found.query, getattr(self.embedder, "scripts", None), lexical.confidence)
        scores = combine(self.mode, lexical.scores, near, weight)
        both = Hits(words=temporal.merge(hits.words, lexical.own),
                    meaning=temporal.merge(hits.meaning, vector_hits(self.mode, near)))
        return SecondStage(found.window, scores, both, temporal.EVENT_WORDS_SHARE if found.anchored else 1.0)

    def event_scores(self, event: str) -> dict[ranking.Key, float]:
        """The turns naming the event: by its words and their translations, and in hybrid also by the
        event's vector (an event named in Chinese is found in an English session)."""
        parsed = cross_language(self.store, self.scope, parse(event, self.store.synonym_groups()))
        own, confidence = lexical_own(self.store, parsed, self.scope)
        if self.embedder is None or self.mode == "fts":
            return own
        try:
            vector = self.embedder.embed([event])[0]
        except Unavailable:
            return own
        near = _nearest(self.vectors, self.scope, self.embedder, vector)
        weight = vector_weight(event, getattr(self.embedder, "scripts", None), confidence)
        return combine("hybrid", own, near, weight)


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


def _nearest(store: EmbeddingStore, scope: Scope, embedder: Provider | None, vector: list[float]) -> list[Nearest]:
    dim = store.model_dim(embedder.name) if embedder else None
    if embedder is None or dim is None or dim != len(vector):
        return []
    # candidates before the role filter, as for full text; the filter applies to the results
    return store.nearest(scope=replace(scope, role=None), model=embedder.name, dim=dim,
                         query=vector, pool=VECTOR_POOL)


def vector_weight(text: str, scripts: tuple[str, ...] | None, confidence: float) -> float:
    """How much the vectors count for this query: VECTOR_WEIGHT when full text found none of its
    terms, down to VECTOR_WEIGHT × VECTOR_FLOOR when one turn holds them all (the words already
    answer; vectors would mostly reorder near-equal turns), times the share of the query the
    model's scripts cover."""
    lexical_doubt = VECTOR_FLOOR + (1.0 - VECTOR_FLOOR) * (1.0 - confidence)
    return VECTOR_WEIGHT * lexical_doubt * script_coverage(text, scripts)


def script_coverage(text: str, scripts: tuple[str, ...] | None) -> float:
    """Share of the query's letters in scripts the model understands (1.0 for a multilingual
    model): an English-only model's vectors of a Chinese question are mostly noise, and fusing
    them would push good full-text hits down."""
    if scripts is None:
        return 1.0
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 1.0
    cjk = sum(1 for c in letters if _is_cjk(c))
    covered = (len(letters) - cjk if "latin" in scripts else 0) + (cjk if "cjk" in scripts else 0)
    return covered / len(letters)


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return 0x3040 <= code <= 0x30FF or 0x3400 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF or 0xAC00 <= code <= 0xD7AF


def combine(mode: SearchMode, lexical: dict[ranking.Key, float], near: list[Nearest],
            vector_weight: float = VECTOR_WEIGHT) -> dict[ranking.Key, float]:
    """fts: BM25; semantic: cosine similarity; hybrid: both scores on one scale, added.

    Hybrid: BM25 divided by the best BM25 of the query (the best word match is 1), plus
    `vector_weight` × the cosine similarity scaled over the nearest pool (the nearest is 1, the
    pool's typical similarity 0, `above_typical`). Scores, not ranks, are fused: a turn that holds every word of the query
    stays ahead of one that is merely about the same thing, while a question worded unlike anything
    stored (another language, other words) is found by its vectors. The vector scores get the
    neighbour credit BM25 scores already carry: the turn nearest to a question is often the question
    asked before, and the answer is the turn after it."""
    if mode == "fts":
        return lexical
    similarity = _similarity(near)
    if mode == "semantic":
        return similarity
    best = max(lexical.values(), default=0.0)
    fused = {key: score / best for key, score in lexical.items()} if best > 0 else {}
    if similarity and vector_weight > 0:
        for key, value in ranking.with_neighbours(above_typical(similarity, _cjk(near))).items():
            fused[key] = fused.get(key, 0.0) + vector_weight * value
    return fused


def _similarity(near: list[Nearest]) -> dict[ranking.Key, float]:
    similarity: dict[ranking.Key, float] = {}
    for n in near:
        key = (n.session_id, n.seq)
        similarity[key] = max(similarity.get(key, -1.0), 1.0 - n.distance)
    return similarity


def vector_hits(mode: SearchMode, near: list[Nearest]) -> dict[ranking.Key, float]:
    """The turns found by their own vector (before neighbour credit): in hybrid, those that stand out
    of the pool (`above_typical`), as in `combine`; in semantic, every nearest turn."""
    if mode == "fts" or not near:
        return {}
    similarity = _similarity(near)
    return similarity if mode == "semantic" else above_typical(similarity, _cjk(near))


def above_typical(similarity: dict[ranking.Key, float],
                  cjk: frozenset[ranking.Key] = frozenset()) -> dict[ranking.Key, float]:
    """The nearest is 1, a pool's typical similarity (its VECTOR_BASE quantile) and below are 0: most
    of the pool is merely near, and only what stands out of it should move the ranking.

    A multilingual model keeps a language gap: a text is nearer to unrelated texts in the question's
    language than to the same meaning in another. So when the pool holds at least SCRIPT_GROUP_MIN
    turns in CJK (`cjk`) and as many in other scripts, each group's typical similarity is its own
    (PER_SCRIPT_BASE): an English answer to a Chinese question stands out of the English turns. The
    scale stays the pool's (nearest minus its typical similarity, at most 1), so a group's best is
    not lifted to the pool's best unless it stands out as far."""
    values = sorted(similarity.values())
    top = values[-1]
    base = _typical(values)
    span = top - base
    if span <= 0:
        return {}
    bases = _script_bases(similarity, cjk)
    found = {}
    for key, value in similarity.items():
        own = bases.get(key in cjk, base)
        if value > own:
            found[key] = min(1.0, (value - own) / span)
    return found


def _typical(ordered: list[float]) -> float:
    return ordered[int((len(ordered) - 1) * VECTOR_BASE)]


def _script_bases(similarity: dict[ranking.Key, float], cjk: frozenset[ranking.Key]) -> dict[bool, float]:
    """Typical similarity of the CJK turns (True) and of the others (False), when both groups are
    large enough to have one; else {} (the pool's)."""
    if not PER_SCRIPT_BASE:
        return {}
    groups: dict[bool, list[float]] = {True: [], False: []}
    for key, value in similarity.items():
        groups[key in cjk].append(value)
    if min(len(values) for values in groups.values()) < SCRIPT_GROUP_MIN:
        return {}
    return {script: _typical(sorted(values)) for script, values in groups.items()}


def _cjk(near: list[Nearest]) -> frozenset[ranking.Key]:
    return frozenset((n.session_id, n.seq) for n in near if n.cjk)
