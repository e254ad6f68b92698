"""Full text: BM25 of the query's terms (and their translations, search/crosslang.py) over the
per-project statistics, and the neighbour credit (README.md beside this file)."""

from __future__ import annotations

from dataclasses import replace

from ..search import crosslang, ranking
from ..search.query import ParsedQuery, match_tsquery
from ..store.search_store import Scope, SearchStore
from .candidates import Ask, Candidates, Scores
from .tuning import Tuning


def words(ask: Ask, found: Candidates) -> Candidates:
    """Stage: each turn's own BM25 (`words`) and, with its neighbours' share, the ranking."""
    if ask.mode == "semantic":
        return found
    own, confidence = lexical_own(ask.store, ask.parsed, ask.scope, ask.tuning)
    return replace(found, words=own, scores=ranking.with_neighbours(own, ask.tuning.neighbour_weight),
                   confidence=confidence)


def lexical_own(store: SearchStore, parsed: ParsedQuery, scope: Scope, tuning: Tuning) -> tuple[Scores, float]:
    """Each candidate turn's own BM25, and how sure it is: the best turn's score over what a turn
    holding every query term once would score (0: no term found, 1: all of them)."""
    stats = store.term_stats(scope.project_id, list(parsed.terms))
    weights = ranking.term_weights(parsed.terms, stats)
    matching = ranking.matching_terms(weights, stats, selective_df=tuning.selective_df)
    match = match_tsquery(parsed, matching)
    if match is None or not weights:
        return {}, 0.0
    # The role filter applies to results, not to candidates: an assistant turn is often found
    # through the user turn before it (neighbour credit). `expected`: at most this many rows match
    # (the statistics), which lets the store rank only the newest of a common word's matches.
    expected = sum(stats.df.get(term, 0) for term in matching) if matching else None
    candidates = store.candidates(scope=replace(scope, role=None), match=match, weights=weights,
                                  avg_len=stats.avg_len, k1=tuning.k1, b=tuning.b, pool=tuning.pool,
                                  expected=expected)
    own = {(c.session_id, c.seq): c.score for c in candidates if c.score > 0}
    full = ranking.full_match_score({t: w for t, w in parsed.terms.items() if t not in parsed.translated}, stats)
    confidence = min(1.0, max(own.values(), default=0.0) / full) if full > 0 else 0.0
    return own, confidence


def cross_language(store: SearchStore, scope: Scope, parsed: ParsedQuery, tuning: Tuning) -> ParsedQuery:
    """The query's words in the other language join it at `cross_weight`: per word, the first
    `cross_per_word` translations whose every term the searched memory holds (a dictionary lists
    dozens of rare words for a common one; those not in memory only cost time). Applied where a
    query is parsed, so that snippets highlight the translations too."""
    if tuning.cross_weight <= 0 or not parsed.text.strip():
        return parsed
    options = [[[t for t in crosslang.terms_of(translation) if t not in parsed.terms] for translation in option]
               for option in crosslang.translations(parsed.text)]
    wanted = sorted({t for option in options for terms in option for t in terms})
    if not wanted:
        return parsed
    df = store.term_stats(scope.project_id, wanted).df
    added: dict[str, float] = {}
    for option in options:
        kept = [terms for terms in option if terms and all(df.get(t, 0) > 0 for t in terms)][:tuning.cross_per_word]
        for term in (t for terms in kept for t in terms):
            added[term] = tuning.cross_weight
    if not added:
        return parsed
    return replace(parsed, terms={**added, **parsed.terms}, translated=frozenset(added))
