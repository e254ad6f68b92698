"""Regular expressions with possessive quantifiers, compiled so that every Python 3.11 runs them right.

Redaction and the JSON shape check are written with possessive quantifiers (`x*+`, `x++`, `x?+`,
`x{m,n}+`): they never backtrack, which keeps hostile input linear. The `re` module of Python
3.11.0-3.11.4 mismatches them next to a lookahead or a backtracking sub-pattern (CPython gh-100061,
gh-106052: `(?:(?!')[^\\n])++` runs past the quote), while atomic groups work there. Python's own
definition is `x*+` = `(?>x*)`, so `compile` writes each possessive quantifier as that atomic group
first: the same regex, right on every 3.11.
"""

from __future__ import annotations

import re
from typing import AnyStr

_QUANTIFIER = re.compile(r"[*+?]|\{\d*(?:,\d*)?\}")


def compile(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """re.compile, with each possessive quantifier as its atomic group (not in VERBOSE patterns,
    whose comments this reader does not skip: they hold no possessive quantifier)."""
    if flags & re.VERBOSE:
        return re.compile(pattern, flags)
    if isinstance(pattern, bytes):  # bytes patterns: their syntax is ASCII, so latin-1 carries it both ways
        return re.compile(atomic(pattern.decode("latin-1")).encode("latin-1"), flags)
    return re.compile(atomic(pattern), flags)


def atomic(pattern: str) -> str:
    """`pattern` with every possessive quantifier written as an atomic group around its greedy form."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        end = _atom_end(pattern, i)
        if end > n:
            out.append(pattern[i:])
            break
        atom = _inside_converted(pattern[i:end])
        i = end
        found = _QUANTIFIER.match(pattern, i)
        if found is None:
            out.append(atom)
            continue
        quantifier, i = found.group(), found.end()
        if i < n and pattern[i] == "+":
            out.append(f"(?>{atom}{quantifier})")
            i += 1
        elif i < n and pattern[i] == "?":  # lazy
            out.append(f"{atom}{quantifier}?")
            i += 1
        else:
            out.append(atom + quantifier)
    return "".join(out)


def _atom_end(p: str, i: int) -> int:
    """Where the atom starting at `i` ends: an escape, a character class, a group or one character."""
    if p[i] == "\\":
        return _escape_end(p, i)
    if p[i] == "[":
        return _class_end(p, i)
    if p[i] == "(":
        depth, j = 0, i
        while j < len(p):
            if p[j] == "\\":
                j = _escape_end(p, j)
                continue
            if p[j] == "[":
                j = _class_end(p, j)
                continue
            depth += {"(": 1, ")": -1}.get(p[j], 0)
            j += 1
            if depth == 0:
                return j
        return len(p) + 1  # not closed: an invalid pattern, left for re.compile to refuse
    return i + 1


def _escape_end(p: str, i: int) -> int:
    kind = p[i + 1:i + 2]
    if kind in ("x", "u", "U"):
        return i + 2 + {"x": 2, "u": 4, "U": 8}[kind]
    if kind == "N" and p[i + 2:i + 3] == "{":
        return p.index("}", i) + 1
    if kind.isdigit():
        j = i + 1
        while j < len(p) and j < i + 4 and p[j].isdigit():
            j += 1
        return j
    return i + 2


def _class_end(p: str, i: int) -> int:
    j = i + 1
    if p[j:j + 1] == "^":
        j += 1
    if p[j:j + 1] == "]":
        j += 1
    while j < len(p) and p[j] != "]":
        j = j + 2 if p[j] == "\\" else j + 1
    return j + 1


def _inside_converted(atom: str) -> str:
    """A group with its inside converted too (its prefix kept: `(?:`, `(?P<name>`, `(?<=` …)."""
    if not atom.startswith("(") or atom.startswith(("(?P=", "(?#", "(?(")):
        return atom
    if atom.startswith("(?P<"):
        start = atom.index(">") + 1
    elif atom.startswith(("(?<=", "(?<!")):
        start = 4
    elif atom.startswith(("(?:", "(?=", "(?!", "(?>")):
        start = 3
    elif atom.startswith("(?"):
        colon, close = atom.find(":"), atom.find(")")
        if colon < 0 or close < colon:
            return atom  # global flags such as (?i)
        start = colon + 1
    else:
        start = 1
    return atom[:start] + atomic(atom[start:-1]) + ")"
