"""Multi-hop questions: the turn that answers often names only what another turn introduced ("the
new invoice service is Ledgerly from now on" → later "Ledgerly times out on PDF export"), so the
question's words never reach it.

The strong word hits (`seeds`: own scores at least `seed_share` of the best, at most `seed_turns`)
are read for the names they mention and the question lacks (search/names.py). Only rare names
bridge (in at most `name_max_df` turns of the project): a name said everywhere (a weekday, the
team's database) points nowhere in particular. The `hop_names` rarest are searched alone, and the
turns found are interleaved with the ranking (`interleave`): the r-th gets `hop_share` × the r-th
score of the ranking, so the best turn stays first while the bridged ones land among the best few.
One fetch of the seeds' texts per query; the second search runs only when a rare name was found."""

from __future__ import annotations

from dataclasses import replace

from ..search import ranking
from ..search.names import names_in
from ..search.query import ParsedQuery
from ..search.text import payload_text
from ..search.tokenizer import iter_terms
from .candidates import Ask, Candidates, Scores
from .lexical import lexical_own


def second_hop(ask: Ask, found: Candidates) -> Candidates:
    """Stage: the bridged turns join the word hits (labelled `names` when they hold no query word)."""
    t = ask.tuning
    if t.hop_share <= 0 or not found.words:
        return found
    names = bridge_names(ask, seeds(found.words, t.seed_share, t.seed_turns))
    if not names:
        return found
    hop, _ = lexical_own(ask.store, ParsedQuery(terms=dict.fromkeys(names, 1.0), text=" ".join(names)),
                         ask.scope, t)
    own = interleave(found.words, hop, t.hop_share)
    return replace(found, words=own, hop=hop, scores=ranking.with_neighbours(own, t.neighbour_weight))


def seeds(own: Scores, share: float, turns: int) -> list[ranking.Key]:
    """The strong word hits, best first: those within `share` of the best, at most `turns`."""
    best = max(own.values())
    return [key for key in ranking.top_keys(own, turns) if own[key] >= share * best]


def bridge_names(ask: Ask, keys: list[ranking.Key]) -> list[str]:
    """The terms of the names the `keys` mention that the query lacks and at most `name_max_df`
    turns of the project hold, rarest first (at most `hop_names`)."""
    rows = ask.store.hits(scope=replace(ask.scope, role=None), keys=keys, required=None) if keys else []
    terms: list[str] = []
    for row in rows:
        for name in names_in(payload_text(row["payload"])):
            terms += [term for term, _ in iter_terms(name) if term not in ask.parsed.terms and term not in terms]
    if not terms:
        return []
    stats = ask.store.term_stats(ask.scope.project_id, terms)
    rare = [t for t in terms if 0 < stats.df.get(t, 0) <= ask.tuning.name_max_df]
    return sorted(rare, key=lambda t: (stats.df[t], t))[:ask.tuning.hop_names]


def interleave(first: Scores, second: Scores, share: float) -> Scores:
    """Rank fusion on the first ranking's scale: the r-th key of `second` scores `share` × the r-th
    score of `first` (the last one past its end), and keeps the higher of that and its own. Full
    text interleaves on BM25, hybrid again on its fused scores (vectors.py): the vector side must
    not push the bridged turns back below turns that are merely about the question's topic."""
    if not second or not first or share <= 0:
        return first
    scale = sorted(first.values(), reverse=True)
    fused = dict(first)
    for rank, key in enumerate(ranking.top_keys(second, len(second))):
        fused[key] = max(fused.get(key, 0.0), share * scale[min(rank, len(scale) - 1)])
    return fused
