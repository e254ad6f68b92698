"""A light English stemmer: Porter's steps 1 and 5 (plurals, -ed/-ing, -y, final -e, -ll).

Stemming Latin words was measured at +4 points of recall@5 (README, design note 6). The derivational
steps of Porter (2–4) are left out: they merge words that agents keep apart (e.g. "general" and
"generate"), and the inflections are what questions and answers differ by ("orders" / "order",
"decided" / "decide", "queues" / "queued"). Documents and queries go through the same function.
"""

from __future__ import annotations

VOWELS = frozenset("aeiou")


def _consonant(word: str, i: int) -> bool:
    char = word[i]
    if char in VOWELS:
        return False
    if char == "y":
        return i == 0 or not _consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in the stem."""
    pattern = "".join("c" if _consonant(stem, i) else "v" for i in range(len(stem)))
    collapsed = "".join(ch for i, ch in enumerate(pattern) if i == 0 or pattern[i - 1] != ch)
    return collapsed.count("vc")


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _cvc(word: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y (hop, not hoop): such stems get an e."""
    if len(word) < 3:
        return False
    return (_consonant(word, len(word) - 3) and not _consonant(word, len(word) - 2)
            and _consonant(word, len(word) - 1) and word[-1] not in "wxy")


def _step1a(word: str) -> str:
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("ies"):
        return word[:-2]
    if word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("s"):
        return word[:-1]
    return word


def _step1b(word: str) -> str:
    if word.endswith("eed"):
        return word[:-1] if _measure(word[:-3]) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            stem = word[: -len(suffix)]
            if stem.endswith(("at", "bl", "iz", "u")):  # "u": queued/queuing → queue, as "queue" stays
                return stem + "e"
            if len(stem) > 1 and stem[-1] == stem[-2] and stem[-1] not in "lsz" and _consonant(stem, len(stem) - 1):
                return stem[:-1]
            if _measure(stem) == 1 and _cvc(stem):
                return stem + "e"
            return stem
    return word


def _step1c(word: str) -> str:
    if word.endswith("y") and _has_vowel(word[:-1]):
        return word[:-1] + "i"
    return word


def _step5(word: str) -> str:
    if word.endswith("e"):
        measure = _measure(word[:-1])
        if measure > 1 or (measure == 1 and not _cvc(word[:-1])):
            word = word[:-1]
    if word.endswith("ll") and _measure(word) > 1:
        word = word[:-1]
    return word


def stem(word: str) -> str:
    """Stem a lower-case ASCII word; other words (and short ones) are returned unchanged."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    return _step5(_step1c(_step1b(_step1a(word))))
