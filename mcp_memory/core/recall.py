"""Recall: the prompt-ready history block — decisions first, then messages, each
line dated with its age ("[2025-02-10 · 3 days ago]") and at most 200 characters, decisions
labelled with their status in the language of the question (current ones — accepted, proposed —
before superseded and rejected ones), and a short warning that history may be stale.

Recency (`half_life_days`): off by default. With a half-life of H days, an item's relevance is
multiplied by 0.5 ** (age / H) before ordering (decisions within their status group, messages among
themselves), so a turn H days old needs twice the relevance of one written now. It stays off for
exact-identifier queries (`is_identifier`): a file path, a function or class name, an error code
asks for that thing whenever it was said."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from ..embeddings.providers import Provider
from ..errors import Invalid
from ..inputs import MAX_MATCHES, MAX_RECALL
from ..memory_results import Decision, MessageMatch, Recall, RecallItem
from ..retrieval.tuning import DEFAULT, Tuning
from ..schema import format_time
from ..search.snippet import shorten
from ..search.text import payload_text
from ..store.db import Database
from ..store.memory_store import MemoryStore
from . import decisions as decisions_core
from . import digests as digests_core
from . import hybrid
from . import search as search_core

MAX_LIMIT = MAX_RECALL
DIGEST_DAYS = 2  # from_digest: the latest days with messages
DIGEST_CAP = {"decision": 10, "question": 5, "file": 10, "command": 5}  # lines per section in the text
ITEM_CHARS = 200
MAX_HALF_LIFE_DAYS = 36500.0
RECENCY_POOL = 3  # with a half-life, this many times the limit of messages are weighed
CURRENT = ("accepted", "proposed")  # decisions listed first; superseded and rejected ones after
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
LATEST_SESSIONS = 3  # session start without a decision: the latest sessions read …
LATEST_CAP = 200  # … and at most this many of their newest turns
# "Decision: use RabbitMQ", "**Decided:** …", "- We decided: …", "决定：…" at the start of a line
_DECISION_LINE = re.compile(r"^[\s>*#-]*(?:\*\*)?(?:decision|decided|we decided|final decision|决定|决策|结论)"
                            r"(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*(?P<text>\S.*)$", re.I | re.M)
UNCONFIRMED = {"en": "unconfirmed, said in the session, not recorded", "zh": "未确认：会话中提到，未记录为决策"}

LABELS = {
    "en": {"accepted": "accepted", "rejected": "rejected", "superseded": "superseded", "proposed": "proposed"},
    "zh": {"accepted": "已采纳", "rejected": "已否决", "superseded": "已取代", "proposed": "提议中"},
}
WORDS = {
    "en": {"because": "reason", "replaced": "replaced by", "user": "user", "assistant": "assistant",
           "tool": "tool", "system": "system", "context": "context of #{seq}"},
    "zh": {"because": "原因", "replaced": "已被取代", "user": "用户", "assistant": "助手", "tool": "工具",
           "system": "系统", "context": "#{seq} 的上下文"},
}
HEADER = {
    "en": ("Relevant history from earlier agent sessions. It may be outdated: check that it still applies "
           "to the current task; follow accepted decisions, do not re-propose rejected ones without a new "
           "reason, and never invent history."),
    "zh": "以下是从历史会话中检索到的相关记录，可能已过时：请先判断是否仍适用于当前任务；已采纳的决策默认沿用，"
          "已否决的方案除非有新理由不要再提；禁止编造历史记录。",
}
SECTIONS = {"en": ("Decisions:", "Discussion:"), "zh": ("历史决策：", "历史讨论：")}


def language(query: str) -> str:
    return "zh" if _HAN.search(query) else "en"


def recall(
    db: Database, query: Any, *, project_id: str | None = None, limit: Any = 5, embedder: Provider | None = None,
    include_echoes: bool = False, from_digest: bool = False, half_life_days: Any = None, now: Any = None,
    tuning: Tuning = DEFAULT,
) -> Recall:
    """Messages come from search in its default mode (hybrid when the project has vectors). With
    `from_digest`, the project's latest day digests come first (their lines carry their sources)."""
    text = search_core.check_query(query)
    if from_digest and not (isinstance(project_id, str) and project_id):
        raise Invalid("from_digest needs project_id: digests are per project")
    limit = search_core.check_limit(limit, maximum=MAX_LIMIT)
    half_life = check_half_life(half_life_days)
    if half_life is not None and is_identifier(text):
        half_life = None
    moment = search_core.check_time(now, "now") or datetime.now(UTC)
    max_decisions = limit - min(2, limit // 2)  # leave room for at least some discussion
    found = decisions_core.search(db, text, project_id=project_id, limit=max_decisions, tuning=tuning)
    found = [d for d in found if (d.score or 0) > 0 or _literal_hit(d, text)]
    found = ordered_decisions(found, half_life, moment)
    sources = {(d.session_id, d.message_seq) for d in found}
    wanted = limit + len(found) if half_life is None else min(limit * RECENCY_POOL + len(found), MAX_MATCHES)
    matches = hybrid.search(db, text, embedder=embedder, project_id=project_id, limit=wanted,
                            include_echoes=include_echoes, now=moment, tuning=tuning).matches
    matches = [m for m in matches if (m.session_id, m.seq) not in sources]
    if half_life is not None:
        matches = sorted(matches, key=lambda m: -m.score * decay(age_days(m.created_at, moment), half_life))
    matches = matches[: limit - len(found)]
    lang = language(text)
    items = [_decision_item(d, lang, moment) for d in found] + [_message_item(m, lang, moment) for m in matches]
    block = render(items, lang)
    if not from_digest:
        return Recall(text=block, items=items)
    assert project_id is not None  # checked above
    days = [digests_core.get(db, project_id, day=day) for day in digests_core.recent_days(db, project_id, DIGEST_DAYS)]
    days = [d for d in days if d.lines]
    heads = [digests_core.render(d, cap=DIGEST_CAP) for d in days]
    return Recall(text="\n\n".join([*heads, block] if block else heads), items=items, digests=days)


def check_half_life(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= MAX_HALF_LIFE_DAYS:
        raise Invalid(f"half_life_days must be a number of days above 0 and at most {MAX_HALF_LIFE_DAYS:g}")
    return float(value)


_IDENTIFIER = re.compile(
    r"""^(?:
        [\w.~-]*[/\\][\w./\\~-]+                 # a path: src/app.py, C:\\x\\y, ~/notes
      | [\w-]+\.[A-Za-z][A-Za-z0-9]{0,5}           # a file name: app.py, Dockerfile.dev
      | [A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)+(?:\(\))?  # a dotted or qualified name: os.path.join, Foo::bar
      | [A-Za-z_]\w*\(\)                            # a call: parse()
      | _*[a-z0-9]+(?:_[a-z0-9]+)+_*               # snake_case
      | [A-Z0-9]+(?:_[A-Z0-9]+)+                   # CONSTANT_CASE, ERR_CONN_RESET
      | [a-z]+(?:[A-Z][a-z0-9]*)+                  # camelCase
      | [A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+          # PascalCase
      | [A-Z]{1,6}-?\d{2,}                          # an error code: E0425, TS2345, ORA-00942
      | 0x[0-9A-Fa-f]+                             # a hex code
    )$""", re.VERBOSE)


def is_identifier(query: str) -> bool:
    """An exact-identifier query: one token (quotes and backticks around it aside) that is a path,
    a file name, a qualified or called name, a snake/camel/Pascal/CONSTANT case name or an error
    code. Such a query wants that thing, however old: recency does not weigh it."""
    token = query.strip().strip("`'\"“”「」")
    return bool(token) and not any(c.isspace() for c in token) and bool(_IDENTIFIER.match(token))


def age_days(created_at: str, now: datetime) -> int:
    """Whole days from an RFC 3339 time to now (0 for a time after now)."""
    moment = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    return max(0, (now - moment).days)


def decay(age: int, half_life: float) -> float:
    return float(0.5 ** (age / half_life))


def ordered_decisions(found: list[Decision], half_life: float | None, now: datetime) -> list[Decision]:
    """Current decisions (accepted, proposed) before superseded and rejected ones; within each
    group by relevance (times the recency decay with a half-life), ties as search ordered them."""
    def key(item: tuple[int, Decision]) -> tuple[bool, float, int]:
        n, d = item
        weight = decay(age_days(d.created_at, now), half_life) if half_life is not None else 1.0
        return (d.status not in CURRENT, -(d.score or 0.0) * weight if half_life is not None else 0.0, n)
    return [d for _, d in sorted(enumerate(found), key=key)]


def age_text(days: int, lang: str) -> str:
    """"today", "yesterday", "3 days ago", "2 weeks ago", "5 months ago", "2 years ago" (and zh)."""
    if days <= 1:
        return ("today", "yesterday")[days] if lang == "en" else ("今天", "昨天")[days]
    for limit, span, en, zh in ((14, 1, "days", "天"), (60, 7, "weeks", "周"), (730, 30, "months", "个月"),
                                (10**9, 365, "years", "年")):
        if days < limit:
            amount = days // span
            return f"{amount} {en} ago" if lang == "en" else f"{amount}{zh}前"
    raise AssertionError("unreachable: the last span has no limit")


def _literal_hit(decision: Decision, text: str) -> bool:
    needle = text.strip().lower()
    return needle in decision.summary.lower() or needle in (decision.rationale or "").lower()


def _dated(created_at: str, lang: str, now: datetime | None) -> tuple[str, int | None]:
    """"[2025-02-10 · 3 days ago]" and the age (just the date without a time to count from)."""
    if now is None:
        return f"[{created_at[:10]}]", None
    days = age_days(created_at, now)
    return f"[{created_at[:10]} · {age_text(days, lang)}]", days


def _decision_item(d: Decision, lang: str, now: datetime | None = None) -> RecallItem:
    words = WORDS[lang]
    stamp, days = _dated(d.created_at, lang, now)
    line = f"{stamp} [{LABELS[lang][d.status]}] {d.decision_type}: {d.summary}"
    if d.rationale:
        line += f" — {words['because']}: {d.rationale}"
    if d.superseded_by:
        line = f"{line} ({words['replaced']} {d.superseded_by})"
    return RecallItem(kind="decision", text=shorten(line, ITEM_CHARS), date=d.created_at[:10],
                      session_id=d.session_id, seq=d.message_seq, decision_id=d.decision_id, status=d.status,
                      score=d.score or 0.0, age_days=days)


def _message_item(m: MessageMatch, lang: str, now: datetime) -> RecallItem:
    where = f" @ {m.session_title}" if m.session_title else ""
    body = m.snippet.replace("**", "")
    context = f" ({WORDS[lang]['context'].format(seq=m.context_of)})" if m.why == "context" and m.context_of else ""
    stamp, days = _dated(m.created_at, lang, now)
    line = f"{stamp} {WORDS[lang].get(m.role, m.role)}{where}{context}: {body}"
    return RecallItem(kind="message", text=shorten(line, ITEM_CHARS), date=m.created_at[:10],
                      session_id=m.session_id, seq=m.seq, score=m.score, why=m.why, context_of=m.context_of,
                      age_days=days)


def render(items: list[RecallItem], lang: str) -> str:
    if not items:
        return ""
    lines = [HEADER[lang]]
    for kind, title in zip(("decision", "message"), SECTIONS[lang], strict=True):
        chosen = [i for i in items if i.kind == kind]
        if chosen:
            lines.append(title)
            lines.extend(f"- {i.text}" for i in chosen)
    return "\n".join(lines)


def digest(db: Database, *, project_id: str | None, limit: int = 5) -> Recall:
    """Without a question (a session that just started): the project's latest decisions, in the
    language most of them are written in. With none recorded, the latest discussion (`latest`)."""
    limit = search_core.check_limit(limit, maximum=MAX_LIMIT)
    found = decisions_core.search(db, None, project_id=project_id, limit=limit)
    if not found and project_id:
        return latest(db, project_id, limit)
    lang = language(" ".join(d.summary for d in found)) if found else "en"
    if found and lang == "zh" and sum(bool(_HAN.search(d.summary)) for d in found) * 2 < len(found):
        lang = "en"
    now = datetime.now(UTC)
    items = [_decision_item(d, lang, now) for d in ordered_decisions(found, None, now)]
    return Recall(text=render(items, lang), items=items)


def latest(db: Database, project_id: str, limit: int) -> Recall:
    """Session start when no decision was recorded: the "Decision: …" lines of the latest turns,
    marked unconfirmed (said, never recorded with record_decision), newest first; without any, the
    latest turns themselves. Same block, same item count and size as decisions would take."""
    with db.transaction() as conn:
        rows = MemoryStore(conn).latest_turns(project_id, sessions=LATEST_SESSIONS, cap=LATEST_CAP)
    texts = [(row, payload_text(row["payload"], echoes=False).strip()) for row in rows]
    texts = [(row, text) for row, text in texts if text]
    lines = [(row, m.group("text").strip()) for row, text in texts for m in _DECISION_LINE.finditer(text)]
    lang = language(" ".join(text for _, text in (lines or texts)[:limit]))
    now = datetime.now(UTC)
    if lines:
        items = [_said_item(row, f"[{UNCONFIRMED[lang]}] {line}", lang, now) for row, line in lines[:limit]]
    else:
        items = [_said_item(row, text, lang, now) for row, text in texts[:limit]]
    return Recall(text=render(items, lang), items=items)


def _said_item(row: dict[str, Any], body: str, lang: str, now: datetime) -> RecallItem:
    created = format_time(row["created_at"])
    stamp, days = _dated(created, lang, now)
    where = f" @ {row['title']}" if row.get("title") else ""
    line = f"{stamp} {WORDS[lang].get(row['role'], row['role'])}{where}: {' '.join(body.split())}"
    return RecallItem(kind="message", text=shorten(line, ITEM_CHARS), date=created[:10], session_id=row["session_id"],
                      seq=row["seq"], score=0.0, age_days=days)
