"""The tokenizer shared by documents and queries (README, design note 6).

PostgreSQL's `simple` and `english` configurations cannot split Chinese (超时, 订单 are never found
inside a sentence), and trigram indexes miss two-character words. So the core tokenizes text itself
and stores the result as a tsvector:

- Latin words are lower-cased and stemmed (stem.py); stop words are dropped but keep their position,
  so that phrase queries still measure distances correctly;
- code identifiers are kept whole and also split on `_`, camelCase and letter/digit boundaries
  (`getUserName` → getusername, get, user, name; `500ms` → 500ms, 500, ms);
- numbers are kept;
- CJK runs (Han, kana, Hangul) give every character (unigram) and every pair of neighbours (bigram),
  so a two-character word matches wherever it appears and longer words match by their bigrams.

Pure Python, no database: unit-tested on its own, and run before the append transaction opens.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from .stem import stem
from .stopwords import CJK_BIGRAMS, CJK_CHARS, is_stop_cjk, is_stop_word

CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_RUN = re.compile(rf"(?P<cjk>[{CJK_RANGES}]+)|(?P<word>[^\W{CJK_RANGES}]+)")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+")

MAX_TERM_CHARS = 60
MAX_POSITION = 16383  # tsvector positions are limited to 1..16383


@dataclass(frozen=True)
class Token:
    """A term with its position (1-based, in the token stream) and its span in the source text.

    kind: "word" (a plain word or a part of an identifier), "ident" (a whole identifier),
    "cjk1" (one CJK character), "cjk2" (a CJK bigram)."""

    term: str
    position: int
    start: int
    end: int
    kind: str


def tokenize(text: str) -> list[Token]:
    return list(iter_tokens(text))


def iter_tokens(text: str) -> Iterator[Token]:
    position = 1
    for match in _RUN.finditer(text):
        if match.group("cjk"):
            yield from _cjk(match.group("cjk"), match.start(), position)
            position += len(match.group("cjk"))
        else:
            tokens, used = _word(match.group("word"), match.start(), position)
            yield from tokens
            position += used


def iter_terms(text: str) -> Iterator[tuple[str, int]]:
    """(term, position) pairs: exactly the terms and positions of iter_tokens, without the spans.
    The indexing path runs on every append, so each distinct word is analysed once (cached)."""
    position = 1
    for match in _RUN.finditer(text):
        run = match.group("cjk")
        if run:
            # is_stop_cjk inlined: this loop runs for every CJK character of every message
            last = len(run) - 1
            for i, char in enumerate(run):
                pos = min(MAX_POSITION, position + i)
                stop = char in CJK_CHARS
                if not stop:
                    yield char, pos
                if i < last:
                    pair = run[i : i + 2]
                    if not ((stop and run[i + 1] in CJK_CHARS) or pair in CJK_BIGRAMS):
                        yield pair, pos
            position += len(run)
            continue
        whole, terms = _word_plan(match.group("word"))
        if whole:
            yield whole, min(position, MAX_POSITION)
        for i, term in enumerate(terms):
            if term:
                yield term, min(position + i, MAX_POSITION)
        position += max(len(terms), 1)


@lru_cache(maxsize=200_000)
def _word_plan(word: str) -> tuple[str | None, tuple[str | None, ...]]:
    """(the whole identifier when it has several parts, the normalised term of each part)."""
    parts = [m.group() for m in _PARTS.finditer(word)]
    whole = word.lower() if len(parts) > 1 and len(word) <= MAX_TERM_CHARS else None
    return whole, tuple(normalize_word(part) for part in parts)


def _cjk(run: str, offset: int, position: int) -> Iterator[Token]:
    for i, char in enumerate(run):
        pos = min(position + i, MAX_POSITION)
        if not is_stop_cjk(char):
            yield Token(char, pos, offset + i, offset + i + 1, "cjk1")
        if i + 1 < len(run) and not is_stop_cjk(run[i : i + 2]):
            yield Token(run[i : i + 2], pos, offset + i, offset + i + 2, "cjk2")


def _word(word: str, offset: int, position: int) -> tuple[list[Token], int]:
    """Tokens of one word or identifier, and how many positions it takes."""
    parts = [(m.group(), m.start()) for m in _PARTS.finditer(word)]
    if not parts:
        return [], 1
    tokens: list[Token] = []
    if len(parts) > 1:
        whole = word.lower()
        if len(whole) <= MAX_TERM_CHARS:
            tokens.append(Token(whole, min(position, MAX_POSITION), offset, offset + len(word), "ident"))
    for i, (part, start) in enumerate(parts):
        term = normalize_word(part)
        if term:
            pos = min(position + i, MAX_POSITION)
            tokens.append(Token(term, pos, offset + start, offset + start + len(part), "word"))
    return tokens, len(parts)


def normalize_word(part: str) -> str | None:
    """Lower-case, drop stop words and single letters, stem; None when the part is not a term."""
    lower = part.lower()
    if len(lower) > MAX_TERM_CHARS or is_stop_word(lower):
        return None
    if len(lower) == 1 and not lower.isdigit():
        return None
    return stem(lower)
