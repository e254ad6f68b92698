"""The two values every stage of the pipeline sees: `Ask` (the question and what it may read, fixed
for one search) and `Candidates` (what the stages so far found, replaced by each stage)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..embeddings.providers import Provider
from ..memory_results import SearchMode
from ..search.query import ParsedQuery
from ..search.ranking import Key
from ..search.when import Window
from ..store.embedding_store import EmbeddingStore
from ..store.search_store import Scope, SearchStore
from .tuning import Tuning

Scores = dict[Key, float]


@dataclass(frozen=True)
class Ask:
    store: SearchStore
    vectors: EmbeddingStore | None
    scope: Scope
    parsed: ParsedQuery
    text: str  # the question as asked (dates, "when", a file it names)
    mode: SearchMode
    embedder: Provider | None
    vector: list[float] | None  # the question's embedding (None: no vector side)
    now: datetime  # what "last month" counts from
    limit: int
    hits_only: bool
    tuning: Tuning


@dataclass(frozen=True)
class Candidates:
    scores: Scores = field(default_factory=dict)  # the ranking so far
    words: Scores = field(default_factory=dict)  # own word hits (BM25 before neighbour credit, bridged turns)
    meaning: Scores = field(default_factory=dict)  # own vector hits (those that stand out of the pool)
    hop: Scores = field(default_factory=dict)  # turns found through a bridging name (bridge.py)
    confidence: float = 0.0  # how sure full text is (lexical.py)
    window: Window | None = None  # the period the question is about (window.py)
    inside: Scores = field(default_factory=dict)  # the ranking inside that window
    share: float = 1.0  # what the overall ranking counts against `inside`
    rows: dict[Key, dict[str, Any]] = field(default_factory=dict)  # fetched turns (order.py)
    factors: Scores = field(default_factory=dict)  # score factors of the fetched turns (order.py)

    def hit(self, key: Key) -> float:
        return self.words.get(key, 0.0) + self.meaning.get(key, 0.0)
