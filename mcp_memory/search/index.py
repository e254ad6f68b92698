"""The index form of a message or a decision: a tsvector literal built from the tokenizer's output."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
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
    # iter_terms yields each term's positions in non-decreasing order: a list, without repeats
    positions: dict[str, list[int]] = {}
    for term, position in iter_terms(text):
        seen = positions.get(term)
        if seen is None:
            positions[term] = [position]
        elif seen[-1] != position:
            seen.append(position)
    parts = []
    length = 0
    for term, listed in positions.items():
        if len(listed) > MAX_POSITIONS:
            listed = listed[:MAX_POSITIONS]
        length += len(listed)
        parts.append(f"{_lexeme(term)}:{','.join(map(str, listed))}")
    return IndexedText(" ".join(parts), length, frozenset(positions))


@lru_cache(maxsize=100_000)
def _lexeme(term: str) -> str:
    return lexeme(term)


def index_message(payload: dict[str, Any], *, echo: bool = False) -> IndexedText:
    """A message's index form; `echo`: the whole turn is an echo of mcp-memory's tools (its calls stay
    in its text, so that include_echoes finds them), otherwise calls of those tools are left out."""
    return index_text(payload_text(payload, echoes=echo))
