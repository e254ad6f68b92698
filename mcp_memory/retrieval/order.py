"""From scores to results: the best keys' rows are fetched (every filter applies to them), the
reply to one of the best user turns is lifted close after it, dates and what each turn is adjust
the scores, and recency orders near-equal ones (search/ranking.py `final_order`)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from .. import scaffolding
from ..memory_results import MatchReason, MessageMatch
from ..schema import format_time
from ..search import dates, ranking
from ..search.query import ParsedQuery, phrase_tsquery
from ..search.snippet import snippet
from ..search.text import payload_text
from .candidates import Ask, Candidates
from .window import in_window, merge

# a question that names a file, a path, a flag, code or a command asks for tool output too
_TECHNICAL = re.compile(
    r"`|[\w.~-]*/[\w./~-]+|\b[\w-]+\.[A-Za-z][A-Za-z0-9]{0,5}\b|(?:^|\s)--?[A-Za-z]|\b[a-z]+_[a-z0-9_]+\b"
    r"|\b(?:ls|cat|grep|rg|git|npm|npx|pip|python3?|pytest|docker|kubectl|make|cargo|go|curl|sed|awk|find|"
    r"psql|bash|sh|ssh|cd|mkdir|rm|cp|mv|tail|head|diff|apt|brew|node|uv|ruff|mypy|tsc|yarn|pnpm)\b")


def required_tsquery(parsed: ParsedQuery) -> str | None:
    """What every result must satisfy: the phrases, and none of the excluded words."""
    clauses = [phrase_tsquery(p) for p in parsed.phrases]
    clauses += ["!" + phrase_tsquery(group) for group in parsed.excluded]
    return " & ".join(clauses) or None


def fetch(ask: Ask, found: Candidates) -> Candidates:
    """Stage: the rows of the best `limit` × `fetch_factor` keys (and the window's best) that pass
    every filter. `hits_only` leaves out the turns there only as the context of a hit."""
    scores = merge(found.scores, found.inside, found.share) if found.inside else found.scores
    if ask.hits_only:
        scores = {key: score for key, score in scores.items() if found.hit(key) > 0}
    keys = ranking.top_keys(scores, ask.limit * ask.tuning.fetch_factor)
    keys += [key for key in ranking.top_keys(found.inside, ask.limit) if key not in keys and key in scores]
    rows = ask.store.hits(scope=ask.scope, keys=keys, required=required_tsquery(ask.parsed)) if keys else []
    return replace(found, scores=scores, rows={_key(r): r for r in rows})


def replies(ask: Ask, found: Candidates) -> Candidates:
    """Stage: a question is often worded like the user turn that asked it, and what memory holds is
    the reply: the assistant turn right after each of the best user hits scores at least
    `answer_share` of that turn's score (the symmetric neighbour credit leaves it below other good
    hits). Not with `hits_only`: a reply raised so is context, not a hit."""
    share = ask.tuning.answer_share
    best = [k for k in ranking.top_keys(found.scores, ask.limit) if found.hit(k) > 0]
    if share <= 0 or ask.hits_only or not best:
        return found
    rows = dict(found.rows)
    roles = {key: row["role"] for key, row in rows.items()}
    unseen = [key for key in best if key not in roles]
    if unseen and ask.scope.role == "assistant":  # the role filter left the user turns out
        roles.update({_key(r): r["role"] for r in ask.store.hits(scope=replace(ask.scope, role=None), keys=unseen,
                                                                 required=None)})
    asked = {(sid, seq + 1): (sid, seq) for sid, seq in best if roles.get((sid, seq)) == "user"}
    missing = [key for key in asked if key not in rows]
    if missing:
        fetched = ask.store.hits(scope=ask.scope, keys=missing, required=required_tsquery(ask.parsed))
        rows.update({_key(r): r for r in fetched if r["role"] == "assistant"})
    scores = dict(found.scores)
    for reply, question in asked.items():
        if reply in rows and rows[reply]["role"] == "assistant":
            scores[reply] = max(scores.get(reply, 0.0), share * found.scores[question])
    return replace(found, scores=scores, rows=rows)


def dated(ask: Ask, found: Candidates) -> Candidates:
    """Stage: a question naming a month favours the turns written in it (`month_boost`), a "when"
    question the turns that say when (`when_boost`), a question about a period the turns in it
    (`window_boost`)."""
    t = ask.tuning
    months = dates.named_months(ask.text)
    asks_when = dates.is_time_question(ask.text)
    if not months and not asks_when and found.window is None:
        return found
    factors = dict(found.factors)
    for key, row in found.rows.items():
        factor = 1.0 + t.window_boost if found.window is not None and in_window(found.window, row) else 1.0
        if months and row["created_at"].month in months:
            factor *= 1.0 + t.month_boost
        if asks_when and dates.has_time_expression(payload_text(row["payload"])):
            factor *= 1.0 + t.when_boost
        factors[key] = factors.get(key, 1.0) * factor
    return replace(found, factors=factors)


def conversation_first(ask: Ask, found: Candidates) -> Candidates:
    """Stage: for a question in plain words, what people said (user questions, assistant answers)
    before what tools printed and models thought: tool output, tool calls and thinking alone score
    `noise_share` of their score, unless the question names a file, a path, code or a command. A
    user turn that asked mcp-memory's own tools (the next turns call them) scores `asked_share`:
    an earlier search never outranks what it found."""
    t = ask.tuning
    noisy = t.noise_share < 1.0 and not _TECHNICAL.search(ask.text)
    factors = dict(found.factors)
    if noisy:
        for key, row in found.rows.items():
            if is_noise(row):
                factors[key] = factors.get(key, 1.0) * t.noise_share
    if t.asked_share < 1.0:
        for key in asked_memory(ask, found):
            factors[key] = factors.get(key, 1.0) * t.asked_share
    return replace(found, factors=factors)


def is_noise(row: dict[str, Any]) -> bool:
    """Tool output, a system turn, or an assistant turn with no words of its own (only tool calls or
    thinking)."""
    if row["role"] in ("tool", "system"):
        return True
    if row["role"] != "assistant":
        return False
    content = scaffolding.conversation_content(row["payload"].get("content"))
    if isinstance(content, list):
        content = " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return not (isinstance(content, str) and content.strip())


def asked_memory(ask: Ask, found: Candidates) -> list[ranking.Key]:
    """The fetched user turns (and echoes, with include_echoes) whose next two turns call
    mcp-memory's own tools."""
    users = [key for key, row in found.rows.items() if row["role"] == "user"]
    echoes = [key for key, row in found.rows.items() if _calls_memory(row)]
    if not users:
        return echoes
    after = [(sid, seq + n) for sid, seq in users for n in (1, 2)]
    rows = ask.store.hits(scope=replace(ask.scope, role=None, echoes=True, since=None, until=None), keys=after,
                          required=None)
    calling = {_key(r) for r in rows if _calls_memory(r)}
    return echoes + [(sid, seq) for sid, seq in users if {(sid, seq + 1), (sid, seq + 2)} & calling]


def _calls_memory(row: dict[str, Any]) -> bool:
    calls = row["payload"].get("tool_calls") or []
    names = [(c.get("function") or {}).get("name") for c in calls if isinstance(c, dict)]
    if row["role"] == "tool":
        names.append(row["payload"].get("name"))
    return any(scaffolding.memory_tool(n) is not None for n in names if isinstance(n, str))


def matches(ask: Ask, found: Candidates) -> list[MessageMatch]:
    """The best `limit` fetched turns, score × factors × recency, as labelled matches."""
    t = ask.tuning
    ordered = ranking.final_order(((key, found.scores.get(key, 0.0) * found.factors.get(key, 1.0),
                                    row["created_at"]) for key, row in found.rows.items()),
                                  weight=t.recency_weight, days=t.recency_days)
    return [_match(found.rows[key], score, ask.parsed, found) for key, score in ordered[:ask.limit]]


def _key(row: dict[str, Any]) -> ranking.Key:
    return row["session_id"], row["seq"]


def _match(row: dict[str, Any], score: float, parsed: ParsedQuery, found: Candidates) -> MessageMatch:
    key = _key(row)
    text = snippet(dates.annotate(payload_text(row["payload"]), row["created_at"]), parsed.terms)
    why, context_of = _why(key, text, found)
    return MessageMatch(
        session_id=row["session_id"], seq=row["seq"], role=row["role"], snippet=text,
        created_at=format_time(row["created_at"]), session_title=row["title"], project_id=row["project_id"],
        agent_source=row["agent_source"], score=round(score, 6), why=why, context_of=context_of,
    )


def _why(key: ranking.Key, snippet_text: str, found: Candidates) -> tuple[MatchReason, int | None]:
    """terms: it holds a query term (highlighted as **term**); meaning: its vector is near the
    question; names: found through a bridging name (bridge.py); context: none of these, it
    neighbours a hit, whose seq is returned (the neighbour that counted most)."""
    if "**" in snippet_text:
        return "terms", None
    if found.meaning.get(key, 0.0) > 0:
        return "meaning", None
    if found.words.get(key, 0.0) > 0:
        return "names", None
    session_id, seq = key
    neighbours = [(found.hit((session_id, n)), n) for n in (seq - 1, seq + 1) if found.hit((session_id, n)) > 0]
    return "context", max(neighbours)[1] if neighbours else None
