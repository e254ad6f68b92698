"""Search over messages: rules for arguments, BM25 candidates, neighbour credit, snippets
(README, design note 6). The scoring pieces are pure functions in mcp_memory.search."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, overload

from ..errors import Invalid, NotFound
from ..inputs import MAX_MATCHES, MAX_QUERY_CHARS
from ..memory_results import MatchReason, MessageMatch
from ..schema import ROLES, format_time
from ..search import crosslang, dates, ranking
from ..search.names import names_in
from ..search.query import ParsedQuery, match_tsquery, phrase_tsquery
from ..search.snippet import snippet
from ..search.text import payload_text
from ..search.tokenizer import iter_terms
from ..search.when import Window
from ..store.core_store import Store
from ..store.db import Database
from ..store.search_store import Scope, SearchStore
from . import second_hop, temporal
from .indexer import Indexer
from .temporal import merge

MAX_LIMIT = MAX_MATCHES
HIT_FETCH_FACTOR = 3  # neighbours and filters drop some keys: fetch more than asked, keep `limit`
MONTH_BOOST = 1.0  # time_factors (chosen on the tuning parts of scripts/bench/search_quality.py)
WHEN_BOOST = 0.2
BRIDGE_WEIGHT = 0.3  # a bridged name against a query word ("join"), the best bridged turn against the best ("fuse"); 0: off
BRIDGE_TURNS = 2
BRIDGE_POOL = 2  # the first stage's best turns searched for the BRIDGE_TURNS that name someone
BRIDGE_MODE = "join"  # or "fuse" (`bridged`); constants chosen on the tuning parts
CROSS_WEIGHT = 1.0  # a translated word against a query word (search/crosslang.py); 0: off
CROSS_PER_WORD = 2  # translations kept per query word, among those the searched memory holds
ANSWER_SHARE = 0.6  # the assistant's reply against the user turn before it (`answered`); 0: off
_RELATIVE = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@overload
def check_query(query: Any) -> str: ...
@overload
def check_query(query: Any, *, required: Literal[True]) -> str: ...
@overload
def check_query(query: Any, *, required: bool) -> str | None: ...
def check_query(query: Any, *, required: bool = True) -> str | None:
    if query is None or (isinstance(query, str) and not query.strip() and not required):
        return None
    if not isinstance(query, str) or not query.strip():
        raise Invalid("query must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise Invalid(f"query must be at most {MAX_QUERY_CHARS} characters")
    return query


def check_limit(limit: Any, *, maximum: int = MAX_LIMIT) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= maximum:
        raise Invalid(f"limit must be an integer from 1 to {maximum}")
    return limit


def check_time(value: Any, field: str, *, now: datetime | None = None) -> datetime | None:
    """RFC 3339 / ISO 8601 (a date alone is midnight UTC), or a relative age: 30m, 12h, 7d, 2w."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise Invalid(f"{field} must be an RFC 3339 time or an age such as 7d")
    relative = _RELATIVE.match(value)
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2)
        try:
            return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
        except (OverflowError, ValueError):  # beyond datetime's years 1-9999
            raise Invalid(f"{field} {value} reaches before year 1: give an age of at most 9000 years") from None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise Invalid(f"{field} must be an RFC 3339 time (2026-01-31T12:00:00Z) or an age such as 7d") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def check_role(role: Any) -> str | None:
    if role is not None and role not in ROLES:
        raise Invalid("role must be one of " + ", ".join(ROLES))
    return role


def required_tsquery(parsed: ParsedQuery) -> str | None:
    """What every result must satisfy: the phrases, and none of the excluded words."""
    clauses = [phrase_tsquery(p) for p in parsed.phrases]
    clauses += ["!" + phrase_tsquery(group) for group in parsed.excluded]
    return " & ".join(clauses) or None


def check_scope(
    *, project_id: str | None = None, agent_source: str | None = None, role: Any = None, since: Any = None,
    until: Any = None,
) -> Scope:
    return Scope(project_id=project_id, agent_source=agent_source, role=check_role(role),
                 since=check_time(since, "since"), until=check_time(until, "until"))


def with_session(conn: Any, scope: Scope, session_id: str | None) -> Scope:
    return scope if session_id is None else replace(scope, segments=_segments(Store(conn), session_id))


@dataclass(frozen=True)
class Lexical:
    """Full-text scores, and how sure they are: the best turn's own BM25 over what a turn holding
    every query term once would score (0: no term found, 1: all of them)."""

    scores: dict[ranking.Key, float]
    confidence: float
    own: dict[ranking.Key, float] = field(default_factory=dict)  # before neighbour credit: the word hits
    hop: dict[ranking.Key, float] = field(default_factory=dict)  # found by the second hop (core/second_hop.py)


def fts_scores(store: SearchStore, parsed: ParsedQuery, scope: Scope) -> Lexical:
    """BM25 with neighbour credit, before the role filter and the required phrases. With
    BRIDGE_WEIGHT, the names the best turns mention join the query (`bridged`); the turns naming
    the rare names of any strong hit are interleaved (core/second_hop.py, kept apart in `hop`)."""
    own, confidence = lexical_own(store, parsed, scope)
    lexical = bridged(store, parsed, scope, Lexical(ranking.with_neighbours(own), confidence, own),
                      ranking.top_keys(own, BRIDGE_POOL))
    hop = second_hop.second_hop(store, parsed, scope, lexical.own, lexical_own)
    if not hop:
        return lexical
    own = second_hop.interleave(lexical.own, hop)
    return Lexical(ranking.with_neighbours(own), confidence, own, hop)


def cross_language(store: SearchStore, scope: Scope, parsed: ParsedQuery) -> ParsedQuery:
    """The query's words in the other language (search/crosslang.py) join it at CROSS_WEIGHT: per
    word, the first CROSS_PER_WORD translations whose every term the searched memory holds (a
    dictionary lists dozens of rare words for a common one; those not in memory only cost time).
    Applied where a search's query is parsed, so that snippets highlight the translations too."""
    if CROSS_WEIGHT <= 0 or not parsed.text.strip():
        return parsed
    options = [[[t for t in crosslang.terms_of(translation) if t not in parsed.terms] for translation in option]
               for option in crosslang.translations(parsed.text)]
    wanted = sorted({t for option in options for terms in option for t in terms})
    if not wanted:
        return parsed
    df = store.term_stats(scope.project_id, wanted).df
    added: dict[str, float] = {}
    for option in options:
        kept = [terms for terms in option if terms and all(df.get(t, 0) > 0 for t in terms)][:CROSS_PER_WORD]
        for term in (t for terms in kept for t in terms):
            added[term] = CROSS_WEIGHT
    if not added:
        return parsed
    return replace(parsed, terms={**added, **parsed.terms}, translated=frozenset(added))


def bridged(store: SearchStore, parsed: ParsedQuery, scope: Scope, lexical: Lexical,
            seeds: list[ranking.Key]) -> Lexical:
    """The second stage of a multi-hop question: the names the `seeds` (the first stage's best
    turns) mention and the query lacks (`bridge_terms`). BRIDGE_MODE "join": they join the query at
    BRIDGE_WEIGHT of a query word. "fuse": the turns naming them are found by the names alone and
    that score, scaled so the best is BRIDGE_WEIGHT × the first stage's best, is added — a turn
    that speaks only of the name ("Ledgerly times out") can reach the first stage's top."""
    if BRIDGE_WEIGHT <= 0 or not seeds:
        return lexical
    names = bridge_terms(store, scope, parsed, seeds)
    if not names:
        return lexical
    if BRIDGE_MODE == "join":
        own, _ = lexical_own(store, replace(parsed, terms={**names, **parsed.terms}), scope)
        return Lexical(ranking.with_neighbours(own), lexical.confidence, own)
    by_name, _ = lexical_own(store, ParsedQuery(terms=dict.fromkeys(names, 1.0), text=" ".join(names)), scope)
    top, top_name = max(lexical.own.values(), default=0.0), max(by_name.values(), default=0.0)
    if top <= 0 or top_name <= 0:
        return lexical
    own = dict(lexical.own)
    for key, value in by_name.items():
        own[key] = own.get(key, 0.0) + BRIDGE_WEIGHT * top * value / top_name
    return Lexical(ranking.with_neighbours(own), lexical.confidence, own)


def lexical_own(store: SearchStore, parsed: ParsedQuery, scope: Scope) -> tuple[dict[ranking.Key, float], float]:
    """Each candidate turn's own BM25, and the confidence of `Lexical`."""
    stats = store.term_stats(scope.project_id, list(parsed.terms))
    weights = ranking.term_weights(parsed.terms, stats)
    matching = ranking.matching_terms(weights, stats)
    match = match_tsquery(parsed, matching)
    if match is None or not weights:
        return {}, 0.0
    # The role filter applies to results, not to candidates: an assistant turn is often found
    # through the user turn before it (neighbour credit). `expected`: at most this many rows match
    # (the statistics), which lets the store rank only the newest of a common word's matches.
    expected = sum(stats.df.get(term, 0) for term in matching) if matching else None
    candidates = store.candidates(scope=replace(scope, role=None), match=match, weights=weights,
                                  avg_len=stats.avg_len, k1=ranking.K1, b=ranking.B, pool=ranking.POOL,
                                  expected=expected)
    own = {(c.session_id, c.seq): c.score for c in candidates if c.score > 0}
    full = ranking.full_match_score({t: w for t, w in parsed.terms.items() if t not in parsed.translated}, stats)
    confidence = min(1.0, max(own.values(), default=0.0) / full) if full > 0 else 0.0
    return own, confidence


def bridge_terms(store: SearchStore, scope: Scope, parsed: ParsedQuery, keys: list[ranking.Key]) -> dict[str, float]:
    """Multi-hop questions name a storyline; the turn that answers often names only what an
    earlier turn introduced ("…we named him Biscuit" → "Biscuit chewed…", "the invoice service is
    Ledgerly from now on" → "Ledgerly times out"). The names that the BRIDGE_TURNS best turns
    naming anyone (among the BRIDGE_POOL best, `keys` in rank order) mention and the query lacks,
    at BRIDGE_WEIGHT: a turn that names nobody has no bridge to offer."""
    rows = store.hits(scope=replace(scope, role=None), keys=keys[:BRIDGE_POOL], required=None)
    order = {key: n for n, key in enumerate(keys)}
    rows = sorted(rows, key=lambda row: order[(row["session_id"], row["seq"])])
    found: dict[str, float] = {}
    named = [names for names in (names_in(payload_text(row["payload"])) for row in rows) if names]
    for names in named[:BRIDGE_TURNS]:
        for name in names:
            for term, _ in iter_terms(name):
                if term not in parsed.terms:
                    found[term] = BRIDGE_WEIGHT
    return found


@dataclass(frozen=True)
class Hits:
    """The turns found on their own (before neighbour credit), to label each match: by its words or
    by its meaning (a vector hit). A match that is neither is there as context of a neighbour."""

    words: dict[ranking.Key, float] = field(default_factory=dict)
    meaning: dict[ranking.Key, float] = field(default_factory=dict)

    def score(self, key: ranking.Key) -> float:
        return self.words.get(key, 0.0) + self.meaning.get(key, 0.0)


def fetch_matches(
    store: SearchStore, scope: Scope, parsed: ParsedQuery, scores: dict[ranking.Key, float], limit: int, *,
    hits: Hits | None = None, hits_only: bool = False, window: Window | None = None,
    inside: dict[ranking.Key, float] | None = None, share: float = 1.0,
) -> list[MessageMatch]:
    """The best `limit` of the scored keys that pass every filter, with recency, as matches, each
    labelled (`why`, `context_of`); `hits_only` leaves out the turns that are there only as the
    context of a neighbouring hit. With a `window` (core/temporal.py), the best keys of the ranking
    `inside` it join the candidates (the overall scores times `share`), and the turns in it rank
    higher. The assistant's reply to one of the best user turns ranks close after it (`answered`)."""
    hits = hits or Hits()
    scores = merge(scores, inside, share) if inside else scores
    if hits_only:
        scores = {key: score for key, score in scores.items() if hits.score(key) > 0}
    keys = ranking.top_keys(scores, limit * HIT_FETCH_FACTOR)
    keys += [key for key in ranking.top_keys(inside or {}, limit) if key not in keys and key in scores]
    rows = store.hits(scope=scope, keys=keys, required=required_tsquery(parsed)) if keys else []
    by_key = {(r["session_id"], r["seq"]): r for r in rows}
    if not hits_only:  # a reply raised by `answered` is context, not a hit
        scores = answered(store, scope, parsed, scores, by_key, [k for k in keys[:limit] if hits.score(k) > 0])
    timed = time_factors(parsed.text, by_key, window)
    ordered = ranking.final_order((key, scores[key] * timed.get(key, 1.0), row["created_at"])
                                  for key, row in by_key.items())
    return [_match(by_key[key], score, parsed, hits) for key, score in ordered[:limit]]


def answered(store: SearchStore, scope: Scope, parsed: ParsedQuery, scores: dict[ranking.Key, float],
             by_key: dict[ranking.Key, dict[str, Any]], best: list[ranking.Key]) -> dict[ranking.Key, float]:
    """A question is often worded like the user turn that asked it, and what memory holds is the
    reply: the assistant turn right after each of the `best` user turns (hits, not context) scores
    at least ANSWER_SHARE of that turn's score, so it ranks close after it (the symmetric neighbour
    credit, NEIGHBOUR_WEIGHT of a turn's own score, leaves it below other good hits). The rows of
    replies not fetched yet are added to `by_key`."""
    if ANSWER_SHARE <= 0:
        return scores
    roles = {key: row["role"] for key, row in by_key.items()}
    unseen = [key for key in best if key not in roles]
    if unseen and scope.role == "assistant":  # the role filter left the user turns out of `by_key`
        roles.update({_key(r): r["role"] for r in store.hits(scope=replace(scope, role=None), keys=unseen,
                                                             required=None)})
    replies = {(sid, seq + 1): (sid, seq) for sid, seq in best if roles.get((sid, seq)) == "user"}
    missing = [key for key in replies if key not in by_key]
    if missing:
        fetched = store.hits(scope=scope, keys=missing, required=required_tsquery(parsed))
        by_key.update({_key(r): r for r in fetched if r["role"] == "assistant"})
    raised = dict(scores)
    for reply, asked in replies.items():
        if reply in by_key and by_key[reply]["role"] == "assistant":
            raised[reply] = max(raised.get(reply, 0.0), ANSWER_SHARE * scores[asked])
    return raised


def _key(row: dict[str, Any]) -> ranking.Key:
    return row["session_id"], row["seq"]


def time_factors(text: str, rows: dict[ranking.Key, dict[str, Any]],
                 window: Window | None = None) -> dict[ranking.Key, float]:
    """Dates in ranking: a question that names a month favours the turns written in it; a "when"
    question favours turns that say when (a relative or absolute time expression); a question
    about a period (`window`) favours the turns written in it or naming a day in it."""
    months = dates.named_months(text)
    asks_when = dates.is_time_question(text)
    if not months and not asks_when and window is None:
        return {}
    factors = {}
    for key, row in rows.items():
        factor = 1.0 + temporal.WINDOW_BOOST if window is not None and temporal.in_window(window, row) else 1.0
        if months and row["created_at"].month in months:
            factor *= 1.0 + MONTH_BOOST
        if asks_when and dates.has_time_expression(payload_text(row["payload"])):
            factor *= 1.0 + WHEN_BOOST
        factors[key] = factor
    return factors


def _segments(store: Store, session_id: str) -> list[tuple[str, int, int]]:
    segments = store.lineage(session_id)
    if not segments:
        raise NotFound(f"session {session_id} does not exist")
    return [(s.session_id, s.lower, s.upper if s.upper is not None else 2**62) for s in segments]


def _match(row: dict[str, Any], score: float, parsed: ParsedQuery, hits: Hits) -> MessageMatch:
    key = (row["session_id"], row["seq"])
    text = snippet(dates.annotate(payload_text(row["payload"]), row["created_at"]), parsed.terms)
    why, context_of = _why(key, text, hits)
    return MessageMatch(
        session_id=row["session_id"], seq=row["seq"], role=row["role"], snippet=text,
        created_at=format_time(row["created_at"]), session_title=row["title"], project_id=row["project_id"],
        agent_source=row["agent_source"], score=round(score, 6), why=why, context_of=context_of,
    )


def _why(key: ranking.Key, snippet_text: str, hits: Hits) -> tuple[MatchReason, int | None]:
    """terms: it holds a query term (highlighted as **term**, the message's own asterisks are
    escaped); meaning: its vector is near the question; names: it names someone the best word hits
    name (a multi-hop bridge); context: none of these, it is there because it neighbours a hit, whose
    seq is returned (the neighbour that counted most)."""
    if "**" in snippet_text:
        return "terms", None
    if hits.meaning.get(key, 0.0) > 0:
        return "meaning", None
    if hits.words.get(key, 0.0) > 0:
        return "names", None
    session_id, seq = key
    neighbours = [(hits.score((session_id, n)), n) for n in (seq - 1, seq + 1) if hits.score((session_id, n)) > 0]
    return "context", max(neighbours)[1] if neighbours else None


# synonyms and index maintenance -------------------------------------------------------------------
def _synonym_terms(terms: Any, *, minimum: int) -> list[str]:
    if not isinstance(terms, (list, tuple)) or len(terms) < minimum:
        raise Invalid(f"give at least {minimum} term(s)")
    cleaned = []
    for term in terms:
        if not isinstance(term, str) or not term.strip() or len(term.strip()) > 200:
            raise Invalid("a synonym must be a non-empty string of at most 200 characters")
        cleaned.append(" ".join(term.split()).lower())
    return sorted(set(cleaned))


def add_synonyms(db: Database, terms: Any) -> list[list[str]]:
    """Make the terms (and the groups they already belong to) one group; returns all groups."""
    cleaned = _synonym_terms(terms, minimum=2)
    with db.transaction() as conn:
        store = SearchStore(conn)
        store.add_synonyms(cleaned)
        return store.synonym_groups()


def remove_synonyms(db: Database, terms: Any) -> list[str]:
    cleaned = _synonym_terms(terms, minimum=1)
    with db.transaction() as conn:
        return SearchStore(conn).remove_synonyms(cleaned)


def synonym_groups(db: Database) -> list[list[str]]:
    with db.transaction() as conn:
        return SearchStore(conn).synonym_groups()


def reindex(db: Database, project_id: str | None = None) -> int:
    """Index every stored message the search index does not have yet (restored rows, or a process
    that died before its indexing pass); returns how many."""
    return Indexer(db).reindex(project_id)
