"""The vector side (pgvector): semantic ranks by cosine similarity alone; hybrid adds it to full
text on one scale, calibrated per query so that it may only add to what the words found: it counts
less the surer full text is (`weight_of`: lexical confidence, and the share of the query in
scripts the model knows), and only the part of the nearest pool that stands out of the pool's
typical similarity moves the ranking (`above_typical`)."""

from __future__ import annotations

from dataclasses import replace

from ..embeddings.providers import Provider
from ..memory_results import SearchMode
from ..search import ranking
from ..store.embedding_store import EmbeddingStore, Nearest
from ..store.search_store import Scope
from .bridge import interleave
from .candidates import Ask, Candidates, Scores
from .tuning import Tuning


def meaning(ask: Ask, found: Candidates) -> Candidates:
    """Stage: in semantic and hybrid mode, the nearest turns and the fused ranking."""
    if ask.mode == "fts" or ask.vector is None or ask.vectors is None:
        return found
    near = nearest(ask.vectors, ask.scope, ask.embedder, ask.vector, ask.tuning.vector_pool)
    weight = weight_of(ask.text, getattr(ask.embedder, "scripts", None), found.confidence, ask.tuning)
    scores = combine(ask.mode, found.scores, near, weight, ask.tuning)
    if ask.mode == "hybrid":  # the bridged turns keep their place on the fused scale
        scores = interleave(scores, found.hop, ask.tuning.hop_share)
    return replace(found, scores=scores, meaning=vector_hits(ask.mode, near, ask.tuning))


def nearest(store: EmbeddingStore, scope: Scope, embedder: Provider | None, vector: list[float],
            pool: int) -> list[Nearest]:
    dim = store.model_dim(embedder.name) if embedder else None
    if embedder is None or dim is None or dim != len(vector):
        return []
    # candidates before the role filter, as for full text; the filter applies to the results
    return store.nearest(scope=replace(scope, role=None), model=embedder.name, dim=dim, query=vector, pool=pool)


def weight_of(text: str, scripts: tuple[str, ...] | None, confidence: float, tuning: Tuning) -> float:
    """`vector_weight` when full text found none of the query's terms, down to `vector_weight` ×
    `vector_floor` when one turn holds them all (the words already answer; vectors would mostly
    reorder near-equal turns), times the share of the query the model's scripts cover."""
    doubt = tuning.vector_floor + (1.0 - tuning.vector_floor) * (1.0 - confidence)
    return tuning.vector_weight * doubt * script_coverage(text, scripts)


def script_coverage(text: str, scripts: tuple[str, ...] | None) -> float:
    """Share of the query's letters in scripts the model understands (1.0 for a multilingual model):
    an English-only model's vectors of a Chinese question are mostly noise."""
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


def combine(mode: SearchMode, lexical: Scores, near: list[Nearest], weight: float, tuning: Tuning) -> Scores:
    """fts: BM25; semantic: cosine similarity; hybrid: BM25 over the query's best BM25 (the best
    word match is 1) plus `weight` × the similarity scaled over the pool (`above_typical`), with the
    neighbour credit word scores carry (the turn nearest to a question is often the question asked
    before, and the answer the turn after it). Scores, not ranks, are fused: a turn holding every
    word stays ahead of one merely about the same thing, while a question worded unlike anything
    stored is found by its vectors."""
    if mode == "fts":
        return lexical
    similarity = _similarity(near)
    if mode == "semantic":
        return similarity
    best = max(lexical.values(), default=0.0)
    fused = {key: score / best for key, score in lexical.items()} if best > 0 else {}
    if similarity and weight > 0:
        lifted = ranking.with_neighbours(above_typical(similarity, _cjk(near), tuning), tuning.neighbour_weight)
        for key, value in lifted.items():
            fused[key] = fused.get(key, 0.0) + weight * value
    return fused


def _similarity(near: list[Nearest]) -> Scores:
    similarity: Scores = {}
    for n in near:
        key = (n.session_id, n.seq)
        similarity[key] = max(similarity.get(key, -1.0), 1.0 - n.distance)
    return similarity


def vector_hits(mode: SearchMode, near: list[Nearest], tuning: Tuning) -> Scores:
    """The turns found by their own vector: in hybrid those that stand out of the pool, in semantic
    every nearest turn."""
    if mode == "fts" or not near:
        return {}
    similarity = _similarity(near)
    return similarity if mode == "semantic" else above_typical(similarity, _cjk(near), tuning)


def above_typical(similarity: Scores, cjk: frozenset[ranking.Key], tuning: Tuning) -> Scores:
    """The nearest is 1, the pool's typical similarity (its `vector_base` quantile) and below 0.

    A multilingual model keeps a language gap: a text is nearer to unrelated texts in the question's
    language than to the same meaning in another. So when the pool holds at least
    `script_group_min` turns in CJK (`cjk`) and as many in other scripts, each group is measured
    against its own typical similarity (`per_script_base`). The scale stays the pool's, so a
    group's best is not lifted to the pool's best unless it stands out as far."""
    values = sorted(similarity.values())
    base = _typical(values, tuning.vector_base)
    span = values[-1] - base
    if span <= 0:
        return {}
    bases = _script_bases(similarity, cjk, tuning)
    found = {}
    for key, value in similarity.items():
        own = bases.get(key in cjk, base)
        if value > own:
            found[key] = min(1.0, (value - own) / span)
    return found


def _typical(ordered: list[float], quantile: float) -> float:
    return ordered[int((len(ordered) - 1) * quantile)]


def _script_bases(similarity: Scores, cjk: frozenset[ranking.Key], tuning: Tuning) -> dict[bool, float]:
    if not tuning.per_script_base:
        return {}
    groups: dict[bool, list[float]] = {True: [], False: []}
    for key, value in similarity.items():
        groups[key in cjk].append(value)
    if min(len(values) for values in groups.values()) < tuning.script_group_min:
        return {}
    return {script: _typical(sorted(values), tuning.vector_base) for script, values in groups.items()}


def _cjk(near: list[Nearest]) -> frozenset[ranking.Key]:
    return frozenset((n.session_id, n.seq) for n in near if n.cjk)
