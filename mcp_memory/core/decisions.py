"""Decisions: what was proposed, accepted, rejected or superseded, and why.

A new decision that supersedes another marks the old one superseded in the same transaction.
Updates are optimistic: the caller names the version it read; if it moved, the answer is [conflict]
and the caller reads again."""

from __future__ import annotations

import uuid
from typing import Any

from ..errors import Conflict, Invalid, NotFound
from ..inputs import MAX_DECISION_TYPE, MAX_TEXT
from ..memory_results import Alternative, Decision, DecisionCreated
from ..retrieval.lexical import cross_language
from ..retrieval.tuning import DEFAULT, Tuning
from ..search import ranking
from ..search.index import index_text
from ..search.query import like_pattern, match_tsquery, parse, phrase_tsquery
from ..store.core_store import Store
from ..store.db import Database
from ..store.memory_store import MemoryStore
from ..store.search_store import Scope, SearchStore
from .sanitize import Cleaner
from .search import check_limit, check_query, check_time

STATUSES = ("proposed", "accepted", "rejected", "superseded")
VISIBILITIES = ("private", "team", "public")


def new_decision_id() -> str:
    return f"dec_{uuid.uuid4().hex}"


def check_status(status: Any, field: str = "status") -> str:
    if status not in STATUSES:
        raise Invalid(f"{field} must be one of " + ", ".join(STATUSES))
    return status


def check_text(value: Any, field: str, *, required: bool = False, limit: int = MAX_TEXT) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise Invalid(f"{field} must be a non-empty string" if required else f"{field} must be a string")
    if len(value) > limit:
        raise Invalid(f"{field} must be at most {limit} characters")
    return value


def check_alternatives(value: Any) -> list[dict[str, Any]]:
    """A list of {option, why_not}; a plain string is an option without a reason."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Invalid("alternatives must be a list of {option, why_not}")
    result = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            item = {"option": item}
        if isinstance(item, Alternative):
            item = item.model_dump()
        if not isinstance(item, dict) or not isinstance(item.get("option"), str) or not item["option"].strip():
            raise Invalid(f"alternatives[{i}].option must be a non-empty string")
        result.append(Alternative.model_validate(item).model_dump(exclude_none=True))
    return result


def check_metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid("metadata must be a JSON object")
    return value


def decision_text(decision_type: str, summary: str, rationale: str | None, alternatives: list[dict[str, Any]]) -> str:
    """What a decision is found by: its type, summary, reason and the options it turned down."""
    options = [f"{a['option']} {a.get('why_not') or ''}" for a in alternatives]
    return "\n".join([decision_type, summary, rationale or "", *options])


def record(
    db: Database, session_id: str, decision_type: Any, summary: Any, *, status: Any = "accepted",
    rationale: Any = None, message_seq: Any = None, metadata: Any = None, alternatives: Any = None,
    supersedes: Any = None, visibility: Any = "team", cleaner: Cleaner,
) -> DecisionCreated:
    decision_type = check_text(decision_type, "decision_type", required=True, limit=MAX_DECISION_TYPE)
    summary = check_text(summary, "summary", required=True)
    rationale = check_text(rationale, "rationale")
    status = check_status(status)
    alts = check_alternatives(alternatives)
    if visibility not in VISIBILITIES:
        raise Invalid("visibility must be one of " + ", ".join(VISIBILITIES))
    if message_seq is not None and (not isinstance(message_seq, int) or isinstance(message_seq, bool) or message_seq < 1):
        raise Invalid("message_seq must be a positive integer")
    decision_type = cleaner.clean_text(decision_type)[0] or ""
    summary, rationale, cleaned, metadata = _clean(cleaner, summary, rationale, alts, check_metadata(metadata))
    alts = cleaned or []
    doc = index_text(decision_text(decision_type, summary, rationale, alts))
    decision_id = new_decision_id()
    with db.transaction() as conn:
        session = Store(conn).get_session(session_id)
        if session is None:
            raise NotFound(f"session {session_id} does not exist")
        if message_seq is not None and message_seq > session.last_seq:
            raise Invalid(f"message_seq {message_seq} is beyond the session's last seq ({session.last_seq})")
        if supersedes is not None and not isinstance(supersedes, str):
            raise Invalid("supersedes must be a decision id (dec_…)")
        created = MemoryStore(conn).insert_decision(
            session_id=session_id, decision_id=decision_id, project_id=session.project_id, message_seq=message_seq,
            decision_type=decision_type, summary=summary, status=status, rationale=rationale, alternatives=alts,
            supersedes=supersedes, metadata=metadata, visibility=visibility, tsv=doc.tsv,
        )
    return DecisionCreated(decision_id=created.decision_id, version=created.version)


def update(
    db: Database, decision_id: str, expected_version: Any, *, status: Any = None, summary: Any = None,
    rationale: Any = None, alternatives: Any = None, metadata: Any = None, cleaner: Cleaner,
) -> int:
    """Change status / summary / rationale / alternatives / metadata (merged) if the version still matches."""
    if not isinstance(expected_version, int) or isinstance(expected_version, bool) or expected_version < 1:
        raise Invalid("expected_version must be a positive integer (the version you read)")
    status = check_status(status) if status is not None else None
    summary = check_text(summary, "summary", required=True) if summary is not None else None
    rationale = check_text(rationale, "rationale")
    alts = check_alternatives(alternatives) if alternatives is not None else None
    summary, rationale, alts, extra = _clean(cleaner, summary, rationale, alts, check_metadata(metadata))
    with db.transaction() as conn:
        store = MemoryStore(conn)
        current = store.get_decision(decision_id)
        if current is None:
            raise NotFound(f"decision {decision_id} does not exist")
        if current.version != expected_version:
            raise Conflict(f"decision {decision_id} is at version {current.version}, not {expected_version}: "
                           "read it again (search_decisions) and decide whether your change still applies")
        new_summary = summary or current.summary
        new_rationale = rationale if rationale is not None else current.rationale
        new_alts = alts if alts is not None else [a.model_dump(exclude_none=True) for a in current.alternatives]
        tsv = index_text(decision_text(current.decision_type, new_summary, new_rationale, new_alts)).tsv
        fields = {"status": status or current.status, "summary": new_summary, "rationale": new_rationale,
                  "alternatives": new_alts, "metadata": {**current.metadata, **extra}, "tsv": tsv}
        # the database checks the version again under the row lock: a change in between is a conflict
        return store.update_decision(decision_id, expected_version, **fields)


def _clean(
    cleaner: Cleaner, summary: str | None, rationale: str | None, alternatives: list[dict[str, Any]] | None,
    metadata: dict[str, Any],
) -> tuple[str | None, str | None, list[dict[str, Any]] | None, dict[str, Any]]:
    """The decision's texts as they are stored and indexed: secrets redacted (before the search
    document is built, so a secret is not findable either)."""
    return (cleaner.clean_text(summary)[0], cleaner.clean_text(rationale)[0],
            cleaner.clean_value(alternatives)[0], cleaner.clean_value(metadata)[0])


def get(db: Database, decision_id: str) -> Decision:
    with db.transaction() as conn:
        decision = MemoryStore(conn).get_decision(decision_id)
    if decision is None:
        raise NotFound(f"decision {decision_id} does not exist")
    return decision


def search(
    db: Database, query: Any = None, *, status: Any = None, decision_type: str | None = None,
    project_id: str | None = None, agent_source: str | None = None, session_id: str | None = None,
    since: Any = None, until: Any = None, limit: Any = 10, tuning: Tuning = DEFAULT,
) -> list[Decision]:
    """Keyword (any word, ranked; phrases and -exclusions as in search_messages) plus filters.
    status: one status or a list. Without a query: newest first. `tuning`: the translation's weight."""
    text = check_query(query, required=False)
    statuses = [status] if isinstance(status, str) else status
    if statuses is not None:
        statuses = [check_status(s) for s in statuses]
    params: dict[str, Any] = {
        "status": statuses, "decision_type": decision_type, "project_id": project_id, "agent_source": agent_source,
        "session_id": session_id, "since": check_time(since, "since"), "until": check_time(until, "until"),
        "limit": check_limit(limit), "terms": [], "weights": [], "match": None, "like": None, "exclude": None,
    }
    with db.transaction() as conn:
        if text is not None:
            params.update(_keyword_params(SearchStore(conn), text, project_id, tuning))
        return MemoryStore(conn).search_decisions(params)


def _keyword_params(store: SearchStore, text: str, project_id: str | None, tuning: Tuning) -> dict[str, Any]:
    # the query's words in the other language join it as in search_messages (translations that the
    # project's messages hold: decisions are taken about what was discussed)
    parsed = cross_language(store, Scope(project_id=project_id), parse(text, store.synonym_groups()), tuning)
    stats = store.term_stats(project_id, list(parsed.terms))
    docs = max(stats.docs, 1)
    # A term no message uses may still be in a decision: it gets the highest idf, not zero.
    weights = {t: w * ranking.idf(min(stats.df.get(t, 0), docs), docs) for t, w in parsed.terms.items()}
    terms = sorted(weights)
    exclude = " | ".join(phrase_tsquery(g) for g in parsed.excluded) or None
    return {"terms": terms, "weights": [weights[t] for t in terms], "match": match_tsquery(parsed, terms),
            "like": like_pattern(text.strip()) if not parsed.excluded else None, "exclude": exclude}
