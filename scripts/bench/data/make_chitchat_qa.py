"""Builds chitchat_qa (the format of scripts/bench/search_quality.py) from real conversations that
nobody here wrote or tuned on: the Chit-Chat Challenge corpus of the BYU Perception, Control and
Cognition lab, 7,168 open-domain conversations between people (MIT licence), which the PyPI package
`chitchat-dataset` ships in its wheel (`chitchat_dataset/dataset.json`: conversation UUID →
{"prompt", "start", "messages": [[{"sender", "text", "timestamp"}, …], …]}, one inner list per run of
one sender's messages).

Generated, not stored: the same package version and SEED give the same file, byte for byte
(`pip install chitchat-dataset==0.9.0`, then `python scripts/bench/data/make_chitchat_qa.py [OUT]`;
search_quality.py builds it in memory when given the name `chitchat`).

Which conversations: the CONVERSATIONS whose SHA-256 of SEED + id is smallest among those with at
least MIN_TURNS turns (a rule on the id, not on the content). A conversation is one session of one
project ("chitchat", so every question searches all of them); its first sender is `user`, the
other `assistant`; a run of one sender's messages is one turn, dated by its first message.

Questions are simulated known-item queries (the method of Azzopardi, de Rijke and Balog, "Building
simulated queries for known-item topics", SIGIR 2007): a turn is chosen, and a query is drawn from
its words, a word's chance following its count in the turn. Per conversation, with a random
generator seeded by SEED + id:
- known-item: QUERY_WORDS content words of one turn; the turn answers;
- noisy: the same, with one of the words replaced by a word drawn from the whole sample (memory
  is imperfect); the turn answers;
- reply: words of a turn that asks something ("?") by one speaker; the other speaker's next turn
  answers (the question itself does not count): what was answered, not what was asked;
- temporal: words of one turn and the month and day it was written ("… on May 2"); the turn
  answers (another conversation on another day may hold the same words).
The split (tuning / held-out) is search_quality.py's rule on the conversation id, decided before
any tuning.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

SEED = "mcp-memory chitchat_qa v1"
VERSION = "0.9.0"  # of chitchat-dataset, whose file this was checked against
CONVERSATIONS = 160
MIN_TURNS = 16
QUERY_WORDS = 4
MIN_CONTENT = 7  # content words a chosen turn holds (shorter turns say too little to be asked for)
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
_WORD = re.compile(r"[A-Za-z][a-z']+")
STOP = frozenset(["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "can't", "cannot", "could", "couldn't", "did", "didn't", "do", "does", "doesn't", "doing", "don't", "down", "during", "each", "few", "for", "from", "further", "get", "got", "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "he'd", "he'll", "he's", "her", "here", "here's", "hers", "herself", "him", "himself", "his", "how", "how's", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't", "it", "it's", "its", "itself", "just", "know", "let's", "like", "lol", "me", "more", "most", "mustn't", "my", "myself", "no", "nor", "not", "now", "of", "off", "oh", "ok", "okay", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "really", "same", "shan't", "she", "she'd", "she'll", "she's", "should", "shouldn't", "so", "some", "such", "than", "that", "that's", "the", "their", "theirs", "them", "themselves", "then", "there", "there's", "these", "they", "they'd", "they'll", "they're", "they've", "think", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "wasn't", "we", "we'd", "we'll", "we're", "we've", "well", "were", "weren't", "what", "what's", "when", "when's", "where", "where's", "which", "while", "who", "who's", "whom", "why", "why's", "will", "with", "won't", "would", "wouldn't", "yeah", "yes", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves", "haha", "hahaha", "im", "dont", "thats", "ive", "youre", "cool", "nice", "good", "great", "yea", "yep"])


def source() -> dict[str, Any]:
    from importlib.metadata import version
    from importlib.util import find_spec

    spec = find_spec("chitchat_dataset")
    if spec is None or spec.origin is None:
        raise SystemExit("chitchat_qa needs the corpus: pip install chitchat-dataset==" + VERSION)
    if version("chitchat-dataset") != VERSION:
        print(f"note: chitchat-dataset {version('chitchat-dataset')} is installed, built against {VERSION}",
              file=sys.stderr)
    return json.loads((Path(spec.origin).parent / "dataset.json").read_text(encoding="utf-8"))


def _digest(text: str) -> str:
    return hashlib.sha256(f"{SEED}/{text}".encode()).hexdigest()


def _turns(conv: dict[str, Any]) -> list[dict[str, str]]:
    turns = []
    first = None
    for run in conv["messages"]:
        texts = [m["text"].strip() for m in run if m.get("text", "").strip()]
        if not texts:
            continue
        first = first or run[0]["sender"]
        stamp = run[0]["timestamp"].removesuffix("Z")
        turns.append({"role": "user" if run[0]["sender"] == first else "assistant", "content": " ".join(texts),
                      "date": datetime.fromisoformat(stamp).strftime("%Y-%m-%dT%H:%M:%SZ")})
    return turns


def content_words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text) if w.lower() not in STOP and len(w) > 2]


def draw(rng: random.Random, words: list[str], count: int) -> list[str]:
    """`count` distinct words, each drawn with a chance that follows its count in `words`, in the
    order they first appear."""
    counts = Counter(words)
    chosen: list[str] = []
    while len(chosen) < min(count, len(counts)):
        pool = [w for w in counts if w not in chosen]
        chosen.append(rng.choices(pool, weights=[counts[w] for w in pool])[0])
    return sorted(chosen, key=words.index)


def _questions(cid: str, turns: list[dict[str, str]], ids: list[str], vocabulary: list[str]) -> list[dict]:
    rng = random.Random(_digest(cid))
    rich = [i for i, t in enumerate(turns) if len(content_words(t["content"])) >= MIN_CONTENT]
    asks = [i for i in range(len(turns) - 1) if turns[i]["content"].rstrip().endswith("?")
            and len(content_words(turns[i]["content"])) >= 3 and turns[i + 1]["role"] != turns[i]["role"]
            and len(content_words(turns[i + 1]["content"])) >= 4]
    found: list[dict] = []
    if len(rich) >= 3:
        a, b, c = rng.sample(rich, 3)
        found.append(_q(cid, "known-item", " ".join(draw(rng, content_words(turns[a]["content"]), QUERY_WORDS)), ids[a]))
        words = draw(rng, content_words(turns[b]["content"]), QUERY_WORDS)
        words[rng.randrange(len(words))] = rng.choice(vocabulary)
        found.append(_q(cid, "noisy", " ".join(words), ids[b]))
        day = datetime.fromisoformat(turns[c]["date"].removesuffix("Z"))
        words = draw(rng, content_words(turns[c]["content"]), QUERY_WORDS - 1)
        found.append(_q(cid, "temporal", f"{' '.join(words)} on {MONTHS[day.month - 1]} {day.day}", ids[c]))
    if asks:
        i = rng.choice(asks)
        found.append(_q(cid, "reply", " ".join(draw(rng, content_words(turns[i]["content"]), QUERY_WORDS)),
                        ids[i + 1], evidence=[ids[i], ids[i + 1]]))
    return found


def _q(cid: str, category: str, text: str, answer: str, evidence: list[str] | None = None) -> dict:
    return {"id": f"{cid}:{category}", "question": text, "project": "chitchat", "category": category,
            "conversation": cid, "answer_turns": [answer], "evidence_turns": evidence or [answer]}


def build(corpus: dict[str, Any] | None = None) -> dict[str, Any]:
    corpus = corpus if corpus is not None else source()
    eligible = sorted((cid for cid, conv in corpus.items() if len(_turns(conv)) >= MIN_TURNS), key=_digest)
    chosen = sorted(eligible[:CONVERSATIONS])
    conversations, questions, words = [], [], []
    for cid in chosen:
        words += [w for t in _turns(corpus[cid]) for w in content_words(t["content"])]
    vocabulary = sorted(set(words))
    for cid in chosen:
        turns = _turns(corpus[cid])
        ids = [f"{cid}:{n}" for n in range(len(turns))]
        conversations.append({"id": cid, "project": "chitchat", "agent": "chitchat", "sessions": [
            {"id": cid, "title": corpus[cid].get("prompt") or None,
             "turns": [{"id": i, **t} for i, t in zip(ids, turns, strict=True)]}]})
        questions += _questions(cid, turns, ids, vocabulary)
    return {"name": "chitchat_qa", "version": 1, "description": __doc__.splitlines()[0],
            "conversations": conversations, "questions": questions}


if __name__ == "__main__":
    data = build()
    text = json.dumps(data, ensure_ascii=False, indent=1)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text, encoding="utf-8")
    else:
        print(text)
