"""Hostile JSON, checked before any parser can fail silently or run out of stack.

Every transport decodes its requests through `loads`: the size is checked first (on bytes, before
parsing), then UTF-8, then the shape (`check_shape`: how many values and how deep, so a request
nested 5,000 deep never reaches a recursive parser and one of ten million empty lists never costs
seconds of parsing), then the parsed value is walked for text PostgreSQL cannot hold (lone
surrogates; U+0000 where it is not cleaned). Each failure is an `Invalid` naming the field
(`params.arguments.meta.title`) and the rule.

Every step is linear in the size of the request, whatever its bytes: the shape is read with bytes
methods and regular expressions that cannot backtrack (possessive quantifiers), never a scan that
restarts at each quote. Transports run `loads` off their event loop (a worker thread), because a
request at the size limit still takes a fraction of a second.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from itertools import accumulate
from typing import Any

from . import linear_re
from .errors import Invalid

MAX_DEPTH = 64
MAX_VALUES = 500_000  # strings (keys too), lists, objects and items: parsed in 0.4 s at most (measured)
# A string token, closed or not: possessive, so a match never backtracks and a failed one cannot
# exist (an unterminated string runs to the end of the input instead of being retried at each quote).
_STRING = rb'"(?:[^"\\]++|\\.)*+"?'
_TOKEN = linear_re.compile(_STRING + rb'\s*+:?|[\[\]{}]', re.DOTALL)
# Once escapes are blanked out, every quote left delimits a string (in valid JSON; in anything else
# the parser fails anyway, and the counts below stay bounds on the work).
_BLANK_STRING = linear_re.compile(rb'"[^"]*+"?')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256)]
_SURROGATE = linear_re.compile("[\ud800-\udfff]")


def field_name(path: Iterable[str | int]) -> str:
    parts: list[str] = []
    for part in path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(("." if parts else "") + part)
    return "".join(parts) or "(top level)"


def check_size(raw: bytes, *, limit: int, what: str) -> None:
    if len(raw) > limit:
        raise Invalid(f"{what}: larger than the limit of {limit} bytes ({len(raw)} bytes)")


def check_shape(raw: bytes, *, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES,
                what: str = "request") -> None:
    """Refuse more than `max_values` values or nesting deeper than `max_depth`, before any parser
    runs. Linear whatever the bytes: escapes are blanked with `bytes.replace`, strings are counted
    before the one regex pass that drops them, and the depth is a running sum over the brackets
    left; only a request found too deep is scanned again, to name the keys leading there."""
    blanked = raw.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    too_many = f"{what}: holds more than {max_values} values (strings, keys, lists, objects and items)"
    strings = (blanked.count(b'"') + 1) // 2
    if strings > max_values:
        raise Invalid(too_many)
    bare = _BLANK_STRING.sub(b"", blanked)
    if strings + bare.count(b",") + bare.count(b"[") + bare.count(b"{") > max_values:
        raise Invalid(too_many)
    brackets = bare.translate(None, _NOT_BRACKET)
    if max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > max_depth:
        check_depth(raw, limit=max_depth, what=what)


def check_depth(raw: bytes, *, limit: int = MAX_DEPTH, what: str = "request") -> None:
    """Refuse nesting deeper than `limit`, naming the keys that lead there (one pass over the
    tokens; `check_shape` calls it only once the request is known to be too deep)."""
    keys: list[str | int] = []
    pending: str | None = None
    depth = 0
    for match in _TOKEN.finditer(raw):
        token = match.group()
        if token[:1] == b'"':
            if token.endswith(b":"):
                pending = _key(token)
            continue
        if token in (b"{", b"["):
            depth += 1
            keys.append(pending if pending is not None else (0 if token == b"[" else "?"))
            pending = None
            if depth > limit:
                path = [k for k in keys[:-1] if k != "?"][:8]
                raise Invalid(f"{field_name([what, *path])}: nested deeper than {limit} levels")
        else:
            depth = max(0, depth - 1)
            if keys:
                keys.pop()
            pending = None


def _key(token: bytes) -> str:
    text = token.rstrip(b": \t\r\n")
    try:
        value = json.loads(text)
    except ValueError:
        return "?"
    return value if isinstance(value, str) else "?"


def bad_text(value: Any, path: list[str | int], *, nul_ok: frozenset[str] = frozenset(),
             allow_nul: bool = False) -> str | None:
    """The first string (or key) PostgreSQL cannot store, as `field: rule`; None when all are fine.
    U+0000 is allowed everywhere with `allow_nul`, else under the top-level keys in `nul_ok` (message
    payloads, which the core cleans itself)."""
    stack: list[tuple[Any, list[str | int], bool]] = [(value, path, allow_nul)]
    while stack:
        item, where, nul_allowed = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item, nul_allowed)
            if problem:
                return f"{field_name(where)}: {problem}"
        elif isinstance(item, dict):
            for key, child in item.items():
                problem = _text_problem(key, nul_allowed)
                if problem:
                    return f"{field_name(where)}: a key {problem}"
                allowed = nul_allowed or (len(where) == len(path) and key in nul_ok)
                stack.append((child, [*where, key], allowed))
        elif isinstance(item, list):
            stack.extend((child, [*where, i], nul_allowed) for i, child in enumerate(item))
    return None


def _text_problem(text: str, nul_allowed: bool) -> str | None:
    found = _SURROGATE.search(text)
    if found:
        return f"holds a lone surrogate (U+{ord(found.group()):04X}); text must be valid Unicode"
    if not nul_allowed and "\x00" in text:
        return "holds U+0000 (NUL), which PostgreSQL text cannot store"
    return None


def loads(raw: bytes, *, limit: int, what: str = "request", max_depth: int = MAX_DEPTH,
          max_values: int = MAX_VALUES) -> Any:
    """Parse `raw` after the size and shape checks; `Invalid` (naming `what`) when it is not JSON."""
    check_size(raw, limit=limit, what=what)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Invalid(f"{what}: not valid UTF-8 at byte {exc.start}") from None
    check_shape(raw, max_depth=max_depth, max_values=max_values, what=what)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise Invalid(f"{what}: not valid JSON ({exc})") from None
