"""Ranking rules, pure: BM25 weights, candidate selection, neighbour credit, recency, ties.

The numbers come from the caller (mcp_memory/retrieval/tuning.py); what each rule is for:
- BM25 with per-project term statistics — the store computes the sum over a
  message's terms with the weights given by `term_weights` (query weight × idf);
- a turn's neighbours (previous and next turn of the same session) share its score:
  questions rarely use the words of the one turn that answers — `with_neighbours`;
- recency only separates near-equal scores — `final_order`;
- ties are broken deterministically (score, then created_at, session_id, seq).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

Key = tuple[str, int]


@dataclass(frozen=True)
class TermStats:
    docs: int
    total_len: int
    df: dict[str, int]

    @property
    def avg_len(self) -> float:
        return self.total_len / self.docs if self.docs else 1.0


def idf(df: int, docs: int) -> float:
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


def term_weights(terms: dict[str, float], stats: TermStats) -> dict[str, float]:
    """Query weight × idf for every term that occurs at least once (the others cannot match)."""
    docs = max(stats.docs, 1)
    return {t: w * idf(stats.df[t], docs) for t, w in terms.items() if stats.df.get(t, 0) > 0}


def full_match_score(terms: dict[str, float], stats: TermStats) -> float:
    """What a turn of average length holding every query term once scores (terms absent from the
    project count with the idf of a term never seen): the scale of a query's BM25."""
    docs = max(stats.docs, 1)
    return sum(w * idf(stats.df.get(t, 0), docs) for t, w in terms.items())


def matching_terms(weights: dict[str, float], stats: TermStats, *, selective_df: int) -> list[str]:
    """The terms whose documents become candidates. When some terms are selective, documents that
    hold only very common terms cannot reach the top and are not fetched (the idea of MaxScore),
    which keeps a query over millions of messages within a few thousand candidates."""
    selective = [t for t in weights if stats.df.get(t, 0) <= selective_df]
    return sorted(selective or weights)


def with_neighbours(own: dict[Key, float], weight: float) -> dict[Key, float]:
    """Each turn's own score plus `weight` × each neighbour's (the turns before and after a
    hit become hits too), for word hits and vector hits alike."""
    total = dict(own)
    for (session_id, seq), score in own.items():
        for neighbour in (seq - 1, seq + 1):
            if neighbour >= 1:
                total[(session_id, neighbour)] = total.get((session_id, neighbour), 0.0) + weight * score
    return total


def top_keys(scores: dict[Key, float], count: int) -> list[Key]:
    return sorted(scores, key=lambda k: (-scores[k], k))[:count]


def recency_factor(created_at: datetime, newest: datetime, *, weight: float, days: float) -> float:
    """1 … 1 + `weight` (fading over `days`), relative to the newest result (not to now: the same query over the
    same data gives the same order tomorrow)."""
    age_days = max((newest - created_at).total_seconds(), 0.0) / 86400.0
    return 1.0 + weight * math.exp(-age_days / days)


def final_order(items: Iterable[tuple[Key, float, datetime]], *, weight: float,
                days: float) -> list[tuple[Key, float]]:
    """Score × recency, then created_at (newest first), session_id, seq: one order, always."""
    items = list(items)
    if not items:
        return []
    newest = max(created for _, _, created in items)
    scored = [(key, round(score * recency_factor(created, newest, weight=weight, days=days), 9), created) for key, score, created in items]
    scored.sort(key=lambda item: (-item[1], -item[2].timestamp(), item[0]))
    return [(key, score) for key, score, _ in scored]
