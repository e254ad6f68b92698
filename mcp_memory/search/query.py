"""Search query syntax → weighted terms and a tsquery (pure; README, design note 6).

Syntax: plain words (alternatives, ranked: a missing word lowers the score, it never excludes a
message), "quoted phrases" (required, in order), -word / -"phrase" (excluded), and OR (accepted and
ignored, since words are alternatives anyway). Chinese quotes “…” and 「…」 work like "…".
Agents mostly ask in natural language, so everything that is not syntax is simply text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise

from .tokenizer import Token, tokenize

_SYNTAX = re.compile(r'(?P<neg>-)?(?:"(?P<q1>[^"]*)"|“(?P<q2>[^”]*)”|「(?P<q3>[^」]*)」)|(?:(?<=\s)|^)-(?P<negword>[^\s"]+)')
_OR = re.compile(r"(?:(?<=\s)|^)OR(?=\s|$)")

# Query-side weights: a CJK character alone says little when its bigrams are there too.
KIND_WEIGHT = {"word": 1.0, "ident": 1.0, "cjk2": 1.0, "cjk1": 0.35}
SYNONYM_WEIGHT = 0.8


@dataclass
class ParsedQuery:
    terms: dict[str, float] = field(default_factory=dict)  # term → query weight (before idf)
    phrases: list[list[Token]] = field(default_factory=list)  # required
    excluded: list[list[Token]] = field(default_factory=list)
    text: str = ""  # the free text, for synonym matching
    translated: frozenset[str] = frozenset()  # terms added from the other language (search/crosslang.py)

    @property
    def empty(self) -> bool:
        return not self.terms and not self.phrases


def parse(query: str, synonym_groups: list[list[str]] | None = None) -> ParsedQuery:
    parsed = ParsedQuery()
    free: list[str] = []
    last = 0
    for match in _SYNTAX.finditer(query):
        free.append(query[last : match.start()])
        last = match.end()
        quoted = match.group("q1") or match.group("q2") or match.group("q3")
        if match.group("negword"):
            _add_group(parsed.excluded, match.group("negword"))
        elif match.group("neg"):
            _add_group(parsed.excluded, quoted or "")
        elif quoted:
            tokens = _add_group(parsed.phrases, quoted)
            _add_terms(parsed.terms, tokens)
    free.append(query[last:])
    parsed.text = _OR.sub(" ", " ".join(free))
    _add_terms(parsed.terms, tokenize(parsed.text))
    if synonym_groups:
        expand_synonyms(parsed, synonym_groups)
    return parsed


def _add_group(groups: list[list[Token]], text: str) -> list[Token]:
    tokens = tokenize(text)
    if tokens:
        groups.append(tokens)
    return tokens


def _add_terms(terms: dict[str, float], tokens: list[Token], factor: float = 1.0) -> None:
    runs_with_bigrams = {t.position for t in tokens if t.kind == "cjk2"} | {t.position + 1 for t in tokens if t.kind == "cjk2"}
    for token in tokens:
        weight = KIND_WEIGHT[token.kind] * factor
        if token.kind == "cjk1" and token.position not in runs_with_bigrams:
            weight = factor  # a lone CJK character is a word of its own
        terms[token.term] = max(terms.get(token.term, 0.0), weight)


def expand_synonyms(parsed: ParsedQuery, groups: list[list[str]]) -> None:
    """Add the other members of every synonym group one member of which occurs in the query."""
    haystack = parsed.text.lower()
    words = set(parsed.terms)
    for group in groups:
        if not any(_occurs(member, haystack, words) for member in group):
            continue
        for member in group:
            _add_terms(parsed.terms, tokenize(member), SYNONYM_WEIGHT)


def _occurs(member: str, haystack: str, words: set[str]) -> bool:
    tokens = tokenize(member)
    if not tokens:
        return False
    if any(t.kind.startswith("cjk") for t in tokens):
        return member.lower() in haystack
    return all(t.term in words for t in tokens if t.kind != "ident")


def phrase_tsquery(tokens: list[Token]) -> str:
    """Tokens in order as `a <-> b <2> c`; CJK runs by their bigrams (or the lone character)."""
    chosen = _phrase_tokens(tokens)
    parts = [lexeme(chosen[0].term)]
    for prev, token in pairwise(chosen):
        distance = token.position - prev.position
        parts.append(f"<{max(distance, 0)}>" if distance != 1 else "<->")
        parts.append(lexeme(token.term))
    return "(" + " ".join(parts) + ")"


def _phrase_tokens(tokens: list[Token]) -> list[Token]:
    bigram_positions = {t.position for t in tokens if t.kind == "cjk2"}
    covered = bigram_positions | {p + 1 for p in bigram_positions}
    chosen = []
    for token in tokens:
        if token.kind == "ident":
            continue
        if token.kind == "cjk1" and token.position in covered:
            continue
        chosen.append(token)
    return sorted(chosen, key=lambda t: t.position) or tokens[:1]


def lexeme(term: str) -> str:
    """A tsquery operand, quoted so that no character of the term is read as an operator."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def match_tsquery(parsed: ParsedQuery, any_of: list[str]) -> str | None:
    """The filter: any of `any_of` (or every phrase), all phrases, none of the excluded groups."""
    clauses = []
    if any_of:
        clauses.append("(" + " | ".join(lexeme(t) for t in sorted(any_of)) + ")")
    clauses.extend(phrase_tsquery(p) for p in parsed.phrases)
    if not clauses:
        return None
    clauses.extend("!" + phrase_tsquery(group) for group in parsed.excluded)
    return " & ".join(clauses)


def like_pattern(text: str) -> str:
    """A LIKE/ILIKE pattern that matches `text` anywhere, its wildcards escaped (ESCAPE '\\')."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
