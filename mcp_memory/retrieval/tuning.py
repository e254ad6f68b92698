"""Every number the ranking uses, in one frozen value passed to the pipeline (README.md beside this
file says what each rule does and what it was measured to earn).

Nothing reads a module constant: a benchmark or a test builds a variant with
`dataclasses.replace(DEFAULT, hop_share=0.0)` and passes it. A share or weight of 0 turns its rule
off. The values were chosen on the tuning parts of scripts/bench/search_quality.py only."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..errors import Invalid


@dataclass(frozen=True)
class Tuning:
    # BM25 over the per-project term statistics (search/ranking.py)
    k1: float = 1.2
    b: float = 0.5
    pool: int = 300  # candidates scored exactly by BM25
    selective_df: int = 1000  # terms rarer than this choose the candidates when the query has any
    neighbour_weight: float = 0.5  # a turn's neighbours get this share of its score (the answer is often next)
    recency_weight: float = 0.05  # at most +5 %: orders near-equal scores newest first
    recency_days: float = 90.0
    fetch_factor: int = 3  # rows fetched per result asked: filters and neighbours drop some

    # the query in the other language (search/crosslang.py)
    cross_weight: float = 1.0  # a translated word against a query word
    cross_per_word: int = 2  # translations kept per query word, among those the memory holds

    # multi-hop: the rare names of the strong hits, searched alone and interleaved (bridge.py)
    hop_share: float = 1.0  # the r-th bridged turn against the first pass's r-th score
    seed_share: float = 0.4  # seeds: own word hits scoring at least this share of the best …
    seed_turns: int = 20  # … at most this many
    name_max_df: int = 5  # a name in more turns than this is no bridge
    hop_names: int = 3  # the rarest names searched

    # vectors (vectors.py)
    vector_weight: float = 1.0  # the nearest vector against the best word match
    vector_pool: int = 200  # nearest message vectors fetched
    vector_floor: float = 0.3  # share of vector_weight left when full text is sure
    vector_base: float = 0.5  # quantile of the pool that scales to 0
    per_script_base: bool = True  # CJK turns and the others each against their own typical similarity
    script_group_min: int = 10  # turns of each group in the pool for that

    # time (window.py, order.py)
    window_boost: float = 1.0  # a question about a period: turns in it score 1 + this
    event_words_share: float = 0.5  # an anchored question: what the whole question's ranking still counts
    event_cue_boost: float = 1.0  # an event's turn that says it happened, against one that only names it
    event_pool: int = 20
    month_boost: float = 1.0  # a question naming a month: turns written in it score 1 + this
    when_boost: float = 0.2  # a "when" question: turns that say when score 1 + this

    # what a turn is (order.py)
    answer_share: float = 0.6  # the assistant's reply to one of the best user turns scores at least this share
    noise_share: float = 0.5  # tool output, tool calls, thinking: their score times this (natural-language question)
    asked_share: float = 0.3  # a user turn that asked mcp-memory's own tools: its score times this


DEFAULT = Tuning()


def with_settings(base: Tuning, settings: dict[str, Any]) -> Tuning:
    """`base` with the named fields set (a benchmark's --set NAME=VALUE); [invalid] for a name that
    is not a field, or a value of another type."""
    known = {f.name: f for f in fields(Tuning)}
    changes: dict[str, Any] = {}
    for name, value in settings.items():
        if name not in known:
            raise Invalid(f"tuning has no field {name} (fields: {', '.join(known)})")
        current = getattr(base, name)
        if isinstance(current, bool) != isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Invalid(f"tuning field {name} must be a {type(current).__name__}, not {value!r}")
        changes[name] = type(current)(value)
    return Tuning(**{**{f: getattr(base, f) for f in known}, **changes})
