"""Deriving vectors (README, design note 6): asynchronous, never on the append path. Work is found
through the per-session watermark, so a stopped run resumes where it stopped; storing the same
vectors twice (two workers) is harmless (ON CONFLICT DO NOTHING, the watermark only grows)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from ..embeddings.providers import Provider
from ..embeddings.texts import EmbedItem, batches, items_for
from ..errors import Invalid, Unavailable
from ..store.db import Database
from ..store.embedding_store import EmbeddingRow, EmbeddingStore, PendingSession

log = logging.getLogger(__name__)

SESSIONS_PER_ROUND = 50
MESSAGES_PER_SESSION = 200


@dataclass(frozen=True)
class EmbedStatus:
    available: bool  # pgvector and the embeddings table are there
    model: str | None
    dim: int | None
    vectors: int
    pending: int


def unavailable_reason(db: Database) -> str | None:
    """Why vectors cannot be stored on this server, or None."""
    with db.transaction() as conn:
        if EmbeddingStore(conn).available():
            return None
    return ("pgvector is not installed on this PostgreSQL server (or the schema owner could not create the "
            "extension): semantic search is off, full-text search works")


def prepare_model(db: Database, provider: Provider) -> int:
    """Record the model with its dimension; a model name is never reused with another dimension."""
    dim = provider.dim
    with db.transaction() as conn:
        store = EmbeddingStore(conn)
        if not store.available():
            raise Unavailable(unavailable_reason(db) or "semantic search is unavailable")
        recorded = store.register_model(provider.name, dim)
    if recorded != dim:
        raise Invalid(f"model {provider.name} is recorded with dimension {recorded}, the provider gives {dim}: "
                      "configure another model name")
    return dim


def embed_pending(
    db: Database, provider: Provider, *, project_id: str | None = None, batch: int = 32,
    stop: threading.Event | None = None,
) -> int:
    """Embed every message past the watermark (until `stop` is set); returns how many messages."""
    prepare_model(db, provider)
    total = 0
    while not (stop and stop.is_set()):
        with db.transaction() as conn:
            sessions = EmbeddingStore(conn).pending_sessions(provider.name, project_id, SESSIONS_PER_ROUND)
        if not sessions:
            return total
        for pending in sessions:
            if stop and stop.is_set():
                break
            total += _embed_session(db, provider, pending, batch)
    return total


def _embed_session(db: Database, provider: Provider, pending: PendingSession, batch: int) -> int:
    with db.transaction() as conn:
        messages = EmbeddingStore(conn).session_messages(pending, MESSAGES_PER_SESSION)
    items = [item for m in messages for item in items_for(m.seq, m.payload)]
    rows = [row for chunk in batches(items, batch) for row in _vectors(provider, chunk)]
    # fewer than asked: the rest up to last_seq are inherited (a fork) or not visible; done
    done = messages[-1].seq if len(messages) == MESSAGES_PER_SESSION else pending.last_seq
    with db.transaction() as conn:
        EmbeddingStore(conn).store(pending, provider.name, rows, done)
    return len(messages)


def _vectors(provider: Provider, chunk: list[EmbedItem]) -> list[EmbeddingRow]:
    vectors = provider.embed([item.text for item in chunk])
    return [EmbeddingRow(item.seq, vector) for item, vector in zip(chunk, vectors, strict=True)]


def status(db: Database, model: str | None, project_id: str | None = None) -> EmbedStatus:
    with db.transaction() as conn:
        store = EmbeddingStore(conn)
        if not store.available():
            return EmbedStatus(False, model, None, 0, 0)
        if model is None:
            return EmbedStatus(True, None, None, 0, 0)
        vectors, pending = store.counts(model, project_id)
        return EmbedStatus(True, model, store.model_dim(model), vectors, pending)
