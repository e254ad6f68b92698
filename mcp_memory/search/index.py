"""The index form of a message or a decision: a tsvector literal built from the tokenizer's output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .query import lexeme
from .text import payload_text
from .tokenizer import iter_terms

MAX_POSITIONS = 256  # PostgreSQL keeps at most 256 positions per lexeme


@dataclass(frozen=True)
class IndexedText:
    tsv: str  # tsvector literal: 'term':1,4 'other':2
    length: int  # number of indexed tokens (BM25 document length)
    terms: frozenset[str]


def index_text(text: str) -> IndexedText:
    positions: dict[str, set[int]] = {}
    for term, position in iter_terms(text):
        positions.setdefault(term, set()).add(position)
    parts = []
    for term in sorted(positions):
        listed = sorted(positions[term])[:MAX_POSITIONS]
        parts.append(f"{lexeme(term)}:{','.join(map(str, listed))}")
    length = sum(min(len(p), MAX_POSITIONS) for p in positions.values())
    return IndexedText(" ".join(parts), length, frozenset(positions))


def index_message(payload: dict[str, Any]) -> IndexedText:
    return index_text(payload_text(payload))
