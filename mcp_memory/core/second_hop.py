"""The second hop of a multi-hop question (README, design note 6): the turn that answers often
names only what another turn introduced ("the new invoice service is Ledgerly from now on" →
later "Ledgerly times out on PDF export"), so the question's words never reach it.

The first pass's strong word hits (`seeds`: the turns scoring at least SEED_SHARE of the best,
at most SEED_TURNS) are read for names they mention and the question lacks (`names_in` of
search/names.py). Only rare names bridge (in at most NAME_MAX_DF turns of the project): a name
said everywhere (a weekday, the team's database) points nowhere in particular. The names alone
are then searched, and the result is interleaved with the first pass's ranking (`interleave`): the r-th
turn naming them gets HOP_SHARE × the first pass's r-th score, so the first pass's best turn stays
first while the turns found through the bridge land among the best few. Reading the seeds costs
one fetch of their texts per query; the second search, one more BM25 query, runs only when a rare
name was found."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..search import ranking
from ..search.names import names_in
from ..search.query import ParsedQuery
from ..search.text import payload_text
from ..search.tokenizer import iter_terms
from ..store.search_store import Scope, SearchStore

HOP_SHARE = 1.0  # the r-th bridged turn against the first pass's r-th score; 0: off
SEED_SHARE = 0.4  # seeds: own word hits scoring at least this share of the best …
SEED_TURNS = 20  # … at most this many
NAME_MAX_DF = 5  # a name in more turns than this is no bridge
HOP_NAMES = 3  # the rarest names searched (constants chosen on the tuning parts)


Scores = dict[ranking.Key, float]
Lexical = Callable[[SearchStore, ParsedQuery, Scope], tuple[Scores, float]]


def second_hop(store: SearchStore, parsed: ParsedQuery, scope: Scope, own: Scores, lexical: Lexical) -> Scores:
    """The turns found through the rare names of the first pass's strong hits (`own`: their own
    word scores), by their own score for the names alone; empty when no rare name bridges.
    `lexical` is the first pass's search (own BM25 scores and their confidence, core/search.py
    `lexical_own`). The caller interleaves them with its ranking (`interleave`)."""
    if HOP_SHARE <= 0 or not own:
        return {}
    names = bridge_names(store, scope, parsed, seeds(own))
    if not names:
        return {}
    found, _ = lexical(store, ParsedQuery(terms=dict.fromkeys(names, 1.0), text=" ".join(names)), scope)
    return found


def seeds(own: dict[ranking.Key, float]) -> list[ranking.Key]:
    """The strong word hits, best first: those within SEED_SHARE of the best, at most SEED_TURNS."""
    best = max(own.values())
    return [key for key in ranking.top_keys(own, SEED_TURNS) if own[key] >= SEED_SHARE * best]


def bridge_names(store: SearchStore, scope: Scope, parsed: ParsedQuery, keys: list[ranking.Key]) -> list[str]:
    """The terms of the names the `keys` mention that the query lacks and at most NAME_MAX_DF turns
    of the project hold, rarest first (at most HOP_NAMES)."""
    rows = store.hits(scope=replace(scope, role=None), keys=keys, required=None) if keys else []
    terms: list[str] = []
    for row in rows:
        for name in names_in(payload_text(row["payload"])):
            terms += [term for term, _ in iter_terms(name) if term not in parsed.terms and term not in terms]
    if not terms:
        return []
    stats = store.term_stats(scope.project_id, terms)
    rare = [t for t in terms if 0 < stats.df.get(t, 0) <= NAME_MAX_DF]
    return sorted(rare, key=lambda t: (stats.df[t], t))[:HOP_NAMES]


def interleave(first: Scores, second: Scores, share: float | None = None) -> Scores:
    """Rank fusion on the first pass's scale: the r-th key of `second` scores `share` × the r-th
    score of `first` (the last one past its end), and keeps the higher of that and its own. Full
    text interleaves on BM25, hybrid on its fused scores (core/hybrid.py): the vector side must
    not push the bridged turns back below turns that are merely about the question's topic."""
    share = HOP_SHARE if share is None else share
    if not second or not first or share <= 0:
        return first
    scale = sorted(first.values(), reverse=True)
    fused = dict(first)
    for rank, key in enumerate(ranking.top_keys(second, len(second))):
        value = share * scale[min(rank, len(scale) - 1)]
        fused[key] = max(fused.get(key, 0.0), value)
    return fused
