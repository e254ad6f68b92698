"""One search, top to bottom: each stage takes the question (`Ask`) and what the stages before it
found (`Candidates`) and returns a new `Candidates`; the numbers come from `Ask.tuning`
(tuning.py). README.md beside this file says what each stage does and what it earns.

Scoring finds and scores turns; the time window runs scoring again inside the period a question
names; the rest works on the fetched rows of the best keys."""

from __future__ import annotations

from ..memory_results import MessageMatch
from . import bridge, lexical, order, vectors, window
from .candidates import Ask, Candidates

SCORING: tuple[window.Stage, ...] = (
    lexical.words,  # BM25 of the query and its translations, neighbours sharing a hit's score
    bridge.second_hop,  # multi-hop: the rare names of the strong hits, searched alone, interleaved
    vectors.meaning,  # semantic / hybrid: the nearest turns, calibrated, on the same scale
)

STAGES: tuple[window.Stage, ...] = (
    *SCORING,
    window.inside(SCORING),  # a question about a period: the same scoring inside the window, merged
    order.fetch,  # the best keys' rows, every filter applied
    order.replies,  # the assistant's reply to one of the best user turns ranks close after it
    order.dated,  # a month named, a "when" question, the window: the turns in time score higher
    order.conversation_first,  # people's words before tool output and thinking; memory's own questions last
)


def run(ask: Ask) -> list[MessageMatch]:
    found = Candidates()
    for stage in STAGES:
        found = stage(ask, found)
    return order.matches(ask, found)
