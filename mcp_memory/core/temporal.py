"""Questions anchored in time (README, "Dates"): the period they are about, as a window that the
ranking favours, and a second search inside it.

A relative period ("last month", "上周") counts from the time of the question (`now`). An event
("before the migration", "上线之后") is found by a first search for its words, preferring turns
that say it happened ("finished", "went live", "完成", "上线了"), and its time is the window's edge.
The window is soft: turns in it (written in it, or naming a date in it) rank higher
(`WINDOW_BOOST`), the others are not removed, so a misread period costs order, not answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ..search import ranking
from ..search.query import parse
from ..search.text import payload_text
from ..search.when import Window, anchor_clause, around, dates_in, relative_window
from ..store.search_store import Scope, SearchStore

WINDOW_BOOST = 1.0  # score factor 1 + WINDOW_BOOST in the window (chosen on the tuning parts)
EVENT_WORDS_SHARE = 0.5  # an anchored question: what the whole question's ranking still counts
EVENT_CUE_BOOST = 1.0  # an event's turn that says it happened, against one that only names it
EVENT_POOL = 20
_DONE = re.compile(
    r"\b(?:finish(?:ed)?|complet(?:ed|e)|done|went live|shipped|rolled out|cut over|migrated|launched|released"
    r"|switched|upgraded|deployed)\b|完成|上线了|发布了|切换|搞定|结束了|升级了|迁完", re.I)

EventScores = Callable[[str], dict[ranking.Key, float]]


@dataclass(frozen=True)
class Focus:
    """The period a question is about, and its words without the time expression."""

    window: Window
    query: str
    anchored: bool = False  # the question's words include the event's: the ranking leaves them out


def focus(store: SearchStore, scope: Scope, text: str, now: datetime,
          event_scores: EventScores) -> Focus | None:
    """The question's period: a relative one around `now`, else the side of an event it names."""
    window = relative_window(text, now)
    if window is not None:
        return Focus(window, text)
    anchor = anchor_clause(text)
    if anchor is None:
        return None
    moment = event_time(store, scope, event_scores(anchor.event))
    if moment is None:
        return None
    return Focus(around(anchor, moment), anchor.rest, anchored=True)


def event_time(store: SearchStore, scope: Scope, scores: dict[ranking.Key, float]) -> datetime | None:
    """When the event happened: the best turn for its words, a turn saying it happened counting
    (1 + EVENT_CUE_BOOST) times."""
    keys = ranking.top_keys(scores, EVENT_POOL)
    if not keys:
        return None
    rows = store.hits(scope=replace(scope, role=None), keys=keys, required=None)
    best, moment = 0.0, None
    for row in rows:
        score = scores[(row["session_id"], row["seq"])]
        if _DONE.search(payload_text(row["payload"])):
            score *= 1.0 + EVENT_CUE_BOOST
        if score > best:
            best, moment = score, row["created_at"]
    return moment


def window_scope(scope: Scope, window: Window) -> Scope:
    """The scope narrowed to the window (never widened beyond the caller's since/until)."""
    since = max(window.since, scope.since) if scope.since else window.since
    until = min(window.until, scope.until) if scope.until else window.until
    return replace(scope, since=since, until=until)


def merge(scores: dict[ranking.Key, float], inside: dict[ranking.Key, float],
          share: float = 1.0) -> dict[ranking.Key, float]:
    """The window's own ranking joins the overall one (each key keeps its better score): the
    window's best turns become candidates even when the whole history outranks them. `share`
    scales the overall ranking first (EVENT_WORDS_SHARE for an anchored question, whose event words
    — "migration" — would favour every turn about the event over the answer)."""
    merged = {key: value * share for key, value in scores.items()}
    for key, value in inside.items():
        merged[key] = max(merged.get(key, 0.0), value)
    return merged


def in_window(window: Window, row: dict[str, Any]) -> bool:
    """Written in the window, or naming a day in it."""
    if window.holds(row["created_at"]):
        return True
    return any(window.holds(day) for day in dates_in(payload_text(row["payload"]), row["created_at"]))


def parsed_focus(store: SearchStore, focus_: Focus) -> Any:
    return parse(focus_.query, store.synonym_groups())
