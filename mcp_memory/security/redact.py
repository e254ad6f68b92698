"""Secret redaction: every stored text passes through `Redactor.redact` before it is stored: message
payloads, session meta and titles, snapshot commit messages, decisions, context values (core/sanitize.py
walks each; wiring.py builds the redactor from the `[redaction]` config). Secrets wrapped in base64
are found by decoding the runs that read as base64 text (security/wrapped.py, Redactor._unwrap).

```toml
[redaction]
enabled = true                                  # default
allowlist = ["AKIAIOSFODNN7EXAMPLE", "^test_"]  # regexes; a match that one of them finds is kept
[redaction.patterns]                            # extra rules: name = regex (a `secret` group narrows it)
internal_token = "itk_[A-Za-z0-9]{32}"
```
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .. import linear_re
from ..errors import ConfigError
from . import wrapped
from .patterns import _PLACEHOLDER, _WORDS, BUILTIN, KEY_CHARS, SECRET_KEY, Rule, plausible_assigned_secret

MARKER = "[REDACTED:{name}]"
_MARKER_START = "[REDACTED:"
_REACH = 100  # how far before its key word a key may start (`my_app.database.password`)
# searched in the text before a key word: the start of its run (tried only where a run starts; `\Z`,
# not `$`, which also matches before a final line break and took `\npassword` for the key)
_KEY_BEFORE = linear_re.compile(rf"(?<![{KEY_CHARS}])[{KEY_CHARS}]{{0,{_REACH}}}+\Z")
# the rest of the key after a key word, and the assignment that may follow it (one match for both:
# most key words are not assigned to, and this is the cheap test that says so)
_KEY_AFTER = linear_re.compile(rf"""[{KEY_CHARS}]{{0,{_REACH}}}+(?P<assigns>["']?\s*+(?::=|=>|[:=]))?""")
_KEY_LONGEST = 256  # a longer key is judged by its end
_KIND = linear_re.compile(r"\[REDACTED:(?:base64-)*+([a-z0-9_]++)")  # a secret's kind, inside base64 or not
# between decoded texts redacted together: a NUL is in none of them (wrapped.py reads a run only when
# it decodes to text without control characters), and no rule matches across it without taking it in
_APART = "\n\x00\n"
_NAME = linear_re.compile(r"^[a-z][a-z0-9_]{0,40}$")
# a string holding none of these cannot match a built-in rule (most code and prose): skip it fast
# (Alternatives grouped by their first character: the regex engine then tries one branch per
# position instead of every alternative, a third faster on prose.)
_HINT = linear_re.compile(r"=|:|-----|A(?:[BCGIKNPRS][A-Z]A|Iza)|GOCSPX|SG\.|m(?:mt\.|achine|ysql|ariadb)|"
                   r"g(?:h[pousr]_|ithub_pat_|l[a-z]+-)|"
                   r"sk[-_]|rk_|x(?:ox|app)|whsec_|ya29\.|npm_|p(?:ypi-|assword\s)|hf_|eyJ|[Bb](?i:earer)|"
                   r"s(?:shpass|qlplus|qlldr)|expdp|impdp|rman|pgpass|"
                   r"d(?:ckr_pat_|ocker)|AGE-SECRET-KEY-1|redis-cli|htpasswd|--(?:token|discovery-token|"
                   r"tls-bootstrap-token|certificate-key)")


class Redactor:
    """Replaces secrets with `[REDACTED:<kind>]` and counts them. Deterministic and idempotent:
    redacting redacted text changes nothing, so an idempotent retry yields the same payload hash."""

    def __init__(self, rules: Iterable[Rule] = BUILTIN, allowlist: Iterable[str] = ()) -> None:
        self.rules = tuple(rules)
        self.allowlist = tuple(linear_re.compile(p) for p in allowlist)
        # the cheap pre-filter only knows the built-in rules
        self._hint = _HINT if self.rules == BUILTIN else None
        # every needle of every rule; None when a rule has none (it may match anything)
        needles = {n for rule in self.rules for n in rule.needles}
        # a needle holding another one adds nothing to "is any of them in the text"
        needles = {n for n in needles if not any(other != n and other in n for other in needles)}
        self._needles = _needle_regex(needles) if all(rule.needles for rule in self.rules) else None
        # which rules may match a text: one search for every needle (see _candidates)
        every = {n for rule in self.rules for n in rule.needles}
        self._finder = linear_re.compile(f"(?=({_needle_regex(every).pattern}))") if every else None
        self._always = frozenset(i for i, rule in enumerate(self.rules) if not rule.needles)
        self._rules_of = {found: frozenset(i for i, rule in enumerate(self.rules)
                                           if any(n in found for n in rule.needles)) for found in every}

    def may_match(self, text: str, *, depth: int = 0) -> bool:
        """False when no rule can match anywhere in `text`: the whole payload as JSON is asked
        once, and most payloads need no walk at all (needles hold no character JSON escapes; a
        base64 run is read both ways after a backslash, see security/wrapped.py)."""
        if self._needles is None or self._needles.search(text.lower()) is not None:
            return True
        if depth >= wrapped.DEPTH:
            return False
        decoded = [text for _, readings in wrapped.decoded_runs(text) for _, text in readings]
        return bool(decoded) and self.may_match(_APART.join(decoded), depth=depth + 1)

    def redact(self, text: str) -> tuple[str, int]:
        """The text with secrets replaced, and how many were replaced."""
        return self._redact(text, 0)

    def _redact(self, text: str, depth: int) -> tuple[str, int]:
        if not text:
            return text, 0
        count = 0
        if self._hint is None or self._hint.search(text):
            for index in self._candidates(text.lower()):
                text, found = self._apply(self.rules[index], text)
                count += found
        if depth < wrapped.DEPTH:
            text, found = self._unwrap(text, depth)
            count += found
        return text, count

    def _unwrap(self, text: str, depth: int) -> tuple[str, int]:
        """Each base64 run whose decoded text holds a secret, replaced whole by
        `[REDACTED:base64-<kind>]` (the kind of the first secret in it). The decoded texts are
        redacted together, apart from each other (`_APART`), one pass for all of them; should a
        match take in a separator, each is redacted alone."""
        runs = list(wrapped.decoded_runs(text))
        if not runs:
            return text, 0
        decoded = [reading for _, readings in runs for _, reading in readings]
        redacted = self._redact(_APART.join(decoded), depth + 1)[0].split(_APART)
        if len(redacted) != len(decoded):
            redacted = [self._redact(reading, depth + 1)[0] for reading in decoded]
        pieces: list[str] = []
        last = at = 0  # `at`: the reading of `decoded` and `redacted` the loop is on
        for end, readings in runs:
            chosen = None
            for start, _ in readings:
                if chosen is None and redacted[at] != decoded[at]:
                    chosen = start, _KIND.search(redacted[at])
                at += 1
            if chosen is not None:
                start, kind = chosen
                pieces += (text[last:start], _base64_marker(kind.group(1) if kind else "secret"))
                last = end
        return ("".join(pieces) + text[last:], len(pieces) // 2) if pieces else (text, 0)

    def _candidates(self, lowered: str) -> list[int]:
        """The rules (in order) that hold a needle found in the text, and those that have none: the
        same as asking each rule's `may_match`, in one pass over the text instead of one per rule.
        The finder matches at every position where a needle starts, the longest one there; a shorter
        needle starting there is its prefix, so the rules of every needle inside a found one count."""
        if self._finder is None:
            return sorted(self._always)
        found = set(self._finder.findall(lowered))  # (strings built in C: no match object per needle)
        return sorted(self._always.union(*(self._rules_of[needle] for needle in found)))

    def redact_field(self, key: str, text: str) -> tuple[str, int]:
        """A string stored under a key (meta, metadata, a context value): under a key that names a
        secret (`db_password`, `githubToken`) the whole value is one, unless it is plainly not;
        elsewhere the text is redacted as any text is."""
        if _secret_key(key) and not text.startswith("[REDACTED") and plausible_assigned_secret(text, quoted=True) \
                and not any(p.search(text) for p in self.allowlist):
            return MARKER.format(name="password"), 1
        return self.redact(text)

    def _apply(self, rule: Rule, text: str) -> tuple[str, int]:
        found = 0
        pieces: list[str] = []
        last = 0
        shape = _Shape.of(rule)
        for match in self._matches(rule, text):
            replacement = self._replacement(rule, match, shape)
            if replacement is not None:
                found += 1
                pieces += (text[last:match.start()], replacement)
                last = match.end()
        return ("".join(pieces) + text[last:], found) if found else (text, 0)

    def _matches(self, rule: Rule, text: str) -> Iterator[re.Match[str]]:
        """The rule's matches, left to right, not overlapping. A keyed rule is matched only where a
        key that names a secret ends: its anchor (a key word) is searched in the lower-cased text,
        the key is the run of key characters around it (at most `_REACH` on each side), judged once
        per run, so a text of key words costs one pass whatever its length."""
        if not rule.keyed or rule.anchor is None:
            yield from rule.regex.finditer(text)
            return
        lowered = text.lower()
        anchor = rule.anchor if len(lowered) == len(text) else linear_re.compile(rule.anchor.pattern, re.IGNORECASE)
        done = 0
        key_after, key_before, regex = _KEY_AFTER.match, _KEY_BEFORE.search, rule.regex.match
        for hit in anchor.finditer(lowered if anchor is rule.anchor else text):
            at = hit.start()
            if at < done:
                continue
            after = key_after(text, at)
            end = after.start("assigns") if after else -1  # (it always matches: the key may end at the key word)
            lower = done
            if end < 0 or after is None:  # most key words are not assigned to: one cheap match says so
                done = after.end() if after else hit.end()
                continue
            done = end
            before = key_before(text, max(lower, at - _REACH), at)
            if not _secret_key(text[before.start() if before else at:end]):
                continue
            match = regex(text, end)
            if match is not None:
                done = match.end()
                yield match

    def _replacement(self, rule: Rule, match: re.Match[str], shape: _Shape) -> str | None:
        """The match with its secret replaced by the marker; None when it holds no secret."""
        name = "qsecret" if shape.qsecret and match.start("qsecret") >= 0 else ("secret" if shape.secret else None)
        start, end = match.span(name) if name else match.span()
        text = match.string
        if text.endswith(_MARKER_START, 0, start):
            return None  # the name inside an earlier rule's marker (`[REDACTED:password]`), after its colon
        if not self._is_secret(rule, match, text[start:end], shape, narrowed=name is not None):
            return None
        return text[match.start():start] + shape.marker + text[end:match.end()]

    def _is_secret(self, rule: Rule, match: re.Match[str], secret: str, shape: _Shape, *, narrowed: bool) -> bool:
        if _MARKER_START in secret or (self.allowlist and any(p.search(secret) for p in self.allowlist)):
            return False
        if shape.call and match.group("call"):
            return False  # `token = cache.get(key)`: a call, not a value
        if rule.check_value:
            return _plausible(secret, quoted=shape.quote and bool(match.group("quote")))
        return not (narrowed and (_PLACEHOLDER.match(secret) or secret.lower() in _WORDS))


@dataclass(frozen=True)
class _Shape:
    """Which of the named groups the redactor reads a rule's regex has, and its marker (made once
    per rule, not once per match)."""

    qsecret: bool
    secret: bool
    call: bool
    quote: bool
    marker: str

    @staticmethod
    def of(rule: Rule) -> _Shape:
        groups = rule.regex.groupindex
        return _Shape("qsecret" in groups, "secret" in groups, "call" in groups, "quote" in groups,
                      MARKER.format(name=rule.name))


def _plausible(value: str, *, quoted: bool) -> bool:
    """plausible_assigned_secret, remembered for short values (a text of one assignment repeated
    judges each value once; long values, which an attacker can make all different, are not kept)."""
    return _plausible_cached(value, quoted) if len(value) <= 64 else plausible_assigned_secret(value, quoted=quoted)


@lru_cache(maxsize=4096)
def _plausible_cached(value: str, quoted: bool) -> bool:
    return plausible_assigned_secret(value, quoted=quoted)


@lru_cache(maxsize=256)
def _base64_marker(kind: str) -> str:
    return MARKER.format(name=f"base64-{kind}")


def _secret_key(key: str) -> bool:
    """Whether `key` names a secret (`db_password`, `githubToken`); a long key by its last 256
    characters (keys are attacker-chosen: the cache holds only short ones)."""
    return _secret_key_cached(key[-_KEY_LONGEST:])


@lru_cache(maxsize=4096)
def _secret_key_cached(key: str) -> bool:
    return SECRET_KEY.fullmatch(key) is not None


def _needle_regex(needles: set[str]) -> re.Pattern[str]:
    """"Is any of these in the text": one regex, its alternatives grouped by first character (the
    engine then tries one branch per position: 2.8 µs for a message against 4.4 µs for a loop of
    `in` tests)."""
    by_first: dict[str, list[str]] = {}
    for needle in sorted(needles, key=lambda n: (-len(n), n)):
        by_first.setdefault(needle[0], []).append(re.escape(needle[1:]))
    return linear_re.compile("|".join(f"{re.escape(first)}(?:{'|'.join(rests)})" for first, rests in sorted(by_first.items())))


def from_config(section: Mapping[str, Any] | None) -> Redactor | None:
    """The redactor described by the `[redaction]` config section (None when disabled)."""
    section = section or {}
    if not isinstance(section, Mapping):
        raise ConfigError("config: [redaction] must be a table")
    if section.get("enabled", True) is False:
        return None
    allowlist = section.get("allowlist", [])
    if not isinstance(allowlist, list) or not all(isinstance(p, str) for p in allowlist):
        raise ConfigError("config: redaction.allowlist must be a list of regular expressions")
    extra = section.get("patterns", {})
    if not isinstance(extra, Mapping):
        raise ConfigError("config: [redaction.patterns] must be a table of name = regex")
    rules = [*BUILTIN, *(_extra_rule(name, regex) for name, regex in extra.items())]
    try:
        return Redactor(rules, allowlist)
    except re.error as exc:
        raise ConfigError(f"config: redaction.allowlist has an invalid regex: {exc}") from None


def _extra_rule(name: str, regex: Any) -> Rule:
    if not _NAME.match(name) or not isinstance(regex, str):
        raise ConfigError(f"config: redaction.patterns.{name} must be a lowercase name = a regex string")
    try:
        return Rule(name, linear_re.compile(regex))
    except re.error as exc:
        raise ConfigError(f"config: redaction.patterns.{name} is not a valid regex: {exc}") from None
