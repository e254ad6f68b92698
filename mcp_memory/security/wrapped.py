"""Secrets wrapped in base64: `echo <base64> | base64 -d`, a Kubernetes Secret's `data:` values, a
JSON blob or an `.env` file passed around encoded. Redaction reads every run of base64 characters
long enough to hold a secret, decodes it, and when the decoded bytes are printable UTF-8 text in
which the rules find a secret, the whole run is replaced (`[REDACTED:base64-github_token]`). Runs
that decode to binary (images, compressed data, hashes, random keys of no known shape) or to text
without a secret are kept as they are.

One regex pass finds the runs (each character is read once: a run starts only where no base64
character precedes it); a run is decoded once, and the decoded text (three quarters of the run) is
redacted like any text, at most `DEPTH` levels deep, so the work stays linear in the text.
"""

from __future__ import annotations

import binascii
from collections.abc import Iterator

from .. import linear_re

SHORTEST = 16  # 12 bytes: `user:pass1234`, the shortest text worth decoding
LONGEST = 4 * 1024 * 1024  # a longer run is not decoded (a message is smaller than this)
DEPTH = 2  # base64 inside base64 is read once more, no deeper
# both alphabets: standard (`+/`) and URL-safe (`-_`, JWT parts); a run that mixes them is neither
_RUN = linear_re.compile(rf"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{{{SHORTEST},}}+={{0,2}}+")
_URL_SAFE = str.maketrans("-_", "+/")
# control characters (tab and line breaks aside): what binary decoded as UTF-8 by chance holds
_CONTROL = linear_re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# a run that follows a backslash may begin with the letters of a JSON escape (`\n`, `\u00e9`):
# its base64 starts after them (the text inside a JSON string is read as written)
_ESCAPE = linear_re.compile(r"[nrtbf/]|u[0-9A-Fa-f]{4}")


def decoded_runs(text: str) -> Iterator[tuple[int, list[tuple[int, str]]]]:
    """For each base64 run in `text` that decodes to printable text: where it ends, and where it may
    start with the text it encodes there (two readings after a backslash: the run as it is, and
    the run after the JSON escape it may begin with)."""
    for match in _RUN.finditer(text):
        start, end = match.span()
        decoded = _decode(match.group())
        if not start or text[start - 1] != "\\":
            if decoded is not None:
                yield end, [(start, decoded)]
            continue
        readings = [] if decoded is None else [(start, decoded)]
        escape = _ESCAPE.match(text, start)
        if escape is not None and end - escape.end() >= SHORTEST:
            after = _decode(text[escape.end():end])
            if after is not None:
                readings.append((escape.end(), after))
        if readings:
            yield end, readings


def _decode(run: str) -> str | None:
    """The text a base64 run encodes; None when it is not base64 of printable UTF-8 text."""
    if len(run) > LONGEST:
        return None
    if "-" in run or "_" in run:
        if "+" in run or "/" in run:
            return None  # neither alphabet
        run = run.translate(_URL_SAFE)
    if run[-1] != "=":
        if len(run) % 4 == 1:
            return None  # one character past whole bytes (`\n` and a run: a cheap no, not an exception)
        run += "=" * (-len(run) % 4)
    try:
        decoded = binascii.a2b_base64(run, strict_mode=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None  # not base64 (bad padding, a partial byte), or not UTF-8 text
    return None if _CONTROL.search(decoded) else decoded
