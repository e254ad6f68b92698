"""Recall: the prompt-ready history block — decisions first, then messages, each
line dated and at most 200 characters, decisions labelled with their status in the language of
the question, and a short warning that history may be stale."""

from __future__ import annotations

import re
from typing import Any

from ..embeddings.providers import Provider
from ..errors import Invalid
from ..memory_results import Decision, MessageMatch, Recall, RecallItem
from ..operations import MAX_RECALL
from ..search.snippet import shorten
from ..store.db import Database
from . import decisions as decisions_core
from . import digests as digests_core
from . import hybrid
from . import search as search_core

MAX_LIMIT = MAX_RECALL
DIGEST_DAYS = 2  # from_digest: the latest days with messages
DIGEST_CAP = {"decision": 10, "question": 5, "file": 10, "command": 5}  # lines per section in the text
ITEM_CHARS = 200
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")

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
    include_echoes: bool = False, from_digest: bool = False,
) -> Recall:
    """Messages come from search in its default mode (hybrid when the project has vectors). With
    `from_digest`, the project's latest day digests come first (their lines carry their sources)."""
    text = search_core.check_query(query)
    if from_digest and not (isinstance(project_id, str) and project_id):
        raise Invalid("from_digest needs project_id: digests are per project")
    limit = search_core.check_limit(limit, maximum=MAX_LIMIT)
    max_decisions = limit - min(2, limit // 2)  # leave room for at least some discussion
    found = decisions_core.search(db, text, project_id=project_id, limit=max_decisions)
    found = [d for d in found if (d.score or 0) > 0 or _literal_hit(d, text)]
    sources = {(d.session_id, d.message_seq) for d in found}
    matches = hybrid.search(db, text, embedder=embedder, project_id=project_id, limit=limit + len(found),
                            include_echoes=include_echoes).matches
    matches = [m for m in matches if (m.session_id, m.seq) not in sources][: limit - len(found)]
    lang = language(text)
    items = [_decision_item(d, lang) for d in found] + [_message_item(m, lang) for m in matches]
    block = render(items, lang)
    if not from_digest:
        return Recall(text=block, items=items)
    assert project_id is not None  # checked above
    days = [digests_core.get(db, project_id, day=day) for day in digests_core.recent_days(db, project_id, DIGEST_DAYS)]
    days = [d for d in days if d.lines]
    heads = [digests_core.render(d, cap=DIGEST_CAP) for d in days]
    return Recall(text="\n\n".join([*heads, block] if block else heads), items=items, digests=days)


def _literal_hit(decision: Decision, text: str) -> bool:
    needle = text.strip().lower()
    return needle in decision.summary.lower() or needle in (decision.rationale or "").lower()


def _decision_item(d: Decision, lang: str) -> RecallItem:
    words = WORDS[lang]
    line = f"[{d.created_at[:10]}] [{LABELS[lang][d.status]}] {d.decision_type}: {d.summary}"
    if d.rationale:
        line += f" — {words['because']}: {d.rationale}"
    if d.superseded_by:
        line = f"{line} ({words['replaced']} {d.superseded_by})"
    return RecallItem(kind="decision", text=shorten(line, ITEM_CHARS), date=d.created_at[:10],
                      session_id=d.session_id, seq=d.message_seq, decision_id=d.decision_id, status=d.status,
                      score=d.score or 0.0)


def _message_item(m: MessageMatch, lang: str) -> RecallItem:
    where = f" @ {m.session_title}" if m.session_title else ""
    body = m.snippet.replace("**", "")
    context = f" ({WORDS[lang]['context'].format(seq=m.context_of)})" if m.why == "context" and m.context_of else ""
    line = f"[{m.created_at[:10]}] {WORDS[lang].get(m.role, m.role)}{where}{context}: {body}"
    return RecallItem(kind="message", text=shorten(line, ITEM_CHARS), date=m.created_at[:10],
                      session_id=m.session_id, seq=m.seq, score=m.score, why=m.why, context_of=m.context_of)


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
    language most of them are written in."""
    limit = search_core.check_limit(limit, maximum=MAX_LIMIT)
    found = decisions_core.search(db, None, project_id=project_id, limit=limit)
    lang = language(" ".join(d.summary for d in found)) if found else "en"
    if found and lang == "zh" and sum(bool(_HAN.search(d.summary)) for d in found) * 2 < len(found):
        lang = "en"
    items = [_decision_item(d, lang) for d in found]
    return Recall(text=render(items, lang), items=items)
