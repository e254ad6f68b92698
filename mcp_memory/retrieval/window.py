"""Questions anchored in time: the period they are about, as a window the ranking favours, and a
second ranking inside it.

A relative period ("last month", "上周") counts from the time of the question (`Ask.now`). An
event ("before the migration", "上线之后") is found by a search for its words, preferring turns
that say it happened ("finished", "went live", "完成", "上线了"); its time is the window's edge.
The window is soft: turns in it (written in it, or naming a day in it) score 1 + `window_boost`
(order.py), the others stay, so a misread period costs order, not answers."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import Unavailable
from ..search import ranking
from ..search.query import parse
from ..search.text import payload_text
from ..search.when import Window, anchor_clause, around, dates_in, relative_window
from .candidates import Ask, Candidates, Scores
from .lexical import cross_language, lexical_own
from .vectors import combine, nearest, weight_of

Stage = Callable[[Ask, Candidates], Candidates]
_DONE = re.compile(
    r"\b(?:finish(?:ed)?|complet(?:ed|e)|done|went live|shipped|rolled out|cut over|migrated|launched|released"
    r"|switched|upgraded|deployed)\b|完成|上线了|发布了|切换|搞定|结束了|升级了|迁完", re.I)


def inside(scoring: Sequence[Stage]) -> Stage:
    """The stage that, for a question about a period, runs `scoring` again inside the window."""
    def time_window(ask: Ask, found: Candidates) -> Candidates:
        focus = _focus(ask)
        if focus is None:
            return found
        window, text, anchored = focus
        scope = _narrowed(ask, window)
        parsed = cross_language(ask.store, scope, parse(text, ask.store.synonym_groups()), ask.tuning)
        inner_ask = replace(ask, scope=scope, text=text, parsed=parsed,
                            vector=_embedded(ask, text) if anchored else ask.vector)
        inner = Candidates()
        for stage in scoring:
            inner = stage(inner_ask, inner)
        return replace(found, window=window, inside=inner.scores,
                       share=ask.tuning.event_words_share if anchored else 1.0,
                       words=merge(found.words, inner.words), meaning=merge(found.meaning, inner.meaning))
    return time_window


def _focus(ask: Ask) -> tuple[Window, str, bool] | None:
    """The window, the question's words without the time expression, and whether an event anchors it."""
    window = relative_window(ask.text, ask.now)
    if window is not None:
        return window, ask.text, False
    anchor = anchor_clause(ask.text)
    if anchor is None:
        return None
    moment = event_time(ask, event_scores(ask, anchor.event))
    return None if moment is None else (around(anchor, moment), anchor.rest, True)


def event_scores(ask: Ask, event: str) -> Scores:
    """The turns naming the event: by its words and their translations, and in hybrid also by the
    event's vector (an event named in Chinese is found in an English session)."""
    parsed = cross_language(ask.store, ask.scope, parse(event, ask.store.synonym_groups()), ask.tuning)
    own, confidence = lexical_own(ask.store, parsed, ask.scope, ask.tuning)
    vector = _embedded(ask, event) if ask.mode != "fts" and ask.vector is not None else None
    if vector is None or ask.vectors is None:
        return own
    near = nearest(ask.vectors, ask.scope, ask.embedder, vector, ask.tuning.vector_pool)
    weight = weight_of(event, getattr(ask.embedder, "scripts", None), confidence, ask.tuning)
    return combine("hybrid", own, near, weight, ask.tuning)


def event_time(ask: Ask, scores: Scores) -> datetime | None:
    """When the event happened: the best turn for its words, one saying it happened counting
    1 + `event_cue_boost` times."""
    keys = ranking.top_keys(scores, ask.tuning.event_pool)
    if not keys:
        return None
    rows = ask.store.hits(scope=replace(ask.scope, role=None), keys=keys, required=None)
    best, moment = 0.0, None
    for row in rows:
        score = scores[(row["session_id"], row["seq"])]
        if _DONE.search(payload_text(row["payload"])):
            score *= 1.0 + ask.tuning.event_cue_boost
        if score > best:
            best, moment = score, row["created_at"]
    return moment


def _embedded(ask: Ask, text: str) -> list[float] | None:
    if ask.embedder is None or ask.vector is None:
        return None
    try:  # the question without the event's words ("before the migration")
        return ask.embedder.embed([text])[0]
    except Unavailable:
        return ask.vector


def _narrowed(ask: Ask, window: Window) -> Any:
    """The scope narrowed to the window (never widened beyond the caller's since/until)."""
    scope = ask.scope
    since = max(window.since, scope.since) if scope.since else window.since
    until = min(window.until, scope.until) if scope.until else window.until
    return replace(scope, since=since, until=until)


def merge(scores: Scores, inner: Scores, share: float = 1.0) -> Scores:
    """The window's ranking joins the overall one, each key keeping its better score; `share`
    scales the overall ranking first (an anchored question's event words — "migration" — would
    favour every turn about the event over the answer)."""
    merged = {key: value * share for key, value in scores.items()}
    for key, value in inner.items():
        merged[key] = max(merged.get(key, 0.0), value)
    return merged


def in_window(window: Window, row: dict[str, Any]) -> bool:
    """Written in the window, or naming a day in it."""
    if window.holds(row["created_at"]):
        return True
    return any(window.holds(day) for day in dates_in(payload_text(row["payload"]), row["created_at"]))
