"""Snippets: the part of a message that holds most query terms, hits highlighted as **hit**.

Asterisks of the message itself are escaped (`\\*`, as Markdown does), so that a text that already
holds `**bold**` does not make highlights nest or run together."""

from __future__ import annotations

import re

from .tokenizer import tokenize

WIDTH = 200
HIGHLIGHT_WEIGHT = 0.5  # a CJK character alone (weight 0.35) is highlighted only when nothing else hit
_SPACE = re.compile(r"\s+")


def snippet(text: str, terms: dict[str, float], *, width: int = WIDTH) -> str:
    """The best window of `width` characters (CJK included), with every query term highlighted."""
    text = _SPACE.sub(" ", text).strip()
    spans = [(t.start, t.end, t.term) for t in tokenize(text) if t.term in terms]
    if not spans:
        return _plain(_cut(text, 0, width))
    start = _best_start(spans, terms, width, len(text))
    end = min(len(text), start + width)
    strong = [(s, e) for s, e, term in spans if terms[term] >= HIGHLIGHT_WEIGHT] or [(s, e) for s, e, _ in spans]
    inside = _merge([(s, e) for s, e in strong if s >= start and e <= end])
    pieces, cursor = [], start
    for s, e in inside:
        pieces.append(_plain(text[cursor:s]))
        pieces.append(f"**{_plain(text[s:e])}**")
        cursor = e
    pieces.append(_plain(text[cursor:end]))
    return ("…" if start > 0 else "") + "".join(pieces) + ("…" if end < len(text) else "")


def _plain(text: str) -> str:
    return text.replace("*", "\\*")


def _best_start(spans: list[tuple[int, int, str]], terms: dict[str, float], width: int, length: int) -> int:
    best, best_score = 0, -1.0
    for anchor, _, _ in spans:
        start = max(0, min(anchor - width // 4, length - width))
        seen = {term for s, e, term in spans if s >= start and e <= start + width}
        score = sum(terms[t] for t in seen)
        if score > best_score:
            best, best_score = start, score
    return best


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _cut(text: str, start: int, width: int) -> str:
    end = min(len(text), start + width)
    return text[start:end] + ("…" if end < len(text) else "")


def shorten(text: str, limit: int) -> str:
    """Whitespace collapsed, at most `limit` characters (an ellipsis marks the cut)."""
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"
