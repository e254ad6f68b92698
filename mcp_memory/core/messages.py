"""Appending and reading messages: per-session gap-free seq, idempotency, fork-aware paging."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import Conflict, Invalid, NotFound
from ..models import Message, MessageIn, format_time, parse_message
from ..records import AppendManyResult, Page
from ..search.index import index_message
from ..store.db import Database
from ..store.repo import NewMessage, Store
from ..store.search_repo import IndexRow, SearchStore
from .sanitize import Cleaner

MAX_BATCH = 10_000
MAX_PAGE = 1000


@dataclass(frozen=True)
class Prepared:
    append_id: str
    role: str
    payload: dict[str, Any]
    digest: bytes
    message: MessageIn
    redacted: int


def prepare(raw: Sequence[Any], *, max_bytes: int, cleaner: Cleaner, field: str = "messages") -> list[Prepared]:
    """Validate and normalise a batch before any database work (bad input loses nothing).
    `field` names the argument in errors: "message" for one message, "messages" for a list."""
    if field == "message":
        raw = [raw]
    if not isinstance(raw, (list, tuple)):
        raise Invalid(f"{field} must be a list of messages")
    if not raw:
        raise Invalid(f"{field} must not be empty")
    if len(raw) > MAX_BATCH:
        raise Invalid(f"{field} has {len(raw)} messages; at most {MAX_BATCH} per call")
    prepared = []
    for index, item in enumerate(raw):
        name = field if field == "message" else f"{field}[{index}]"
        message = parse_message(item, field=name, max_bytes=max_bytes)
        payload = message.payload()
        payload.pop("append_id", None)
        payload, redacted = cleaner.clean(payload)
        prepared.append(
            Prepared(
                append_id=message.append_id or f"gen_{uuid.uuid4().hex}",
                role=message.role,
                payload=payload,
                digest=payload_digest(payload),
                message=message,
                redacted=redacted,
            )
        )
    return prepared


def payload_digest(payload: dict[str, Any]) -> bytes:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).digest()


def append(db: Database, session_id: str, batch: list[Prepared]) -> AppendManyResult:
    """Store a batch in one transaction. Seq = last_seq + 1 … under the session row lock.
    The search index is filled in the same transaction; tokenizing happens before it opens."""
    docs = {item.append_id: index_message(item.payload) for item in batch}
    with db.transaction() as conn:
        store = Store(conn)
        locked = store.lock_session(session_id)
        if locked is None:
            raise NotFound(f"session {session_id} does not exist")
        project_id, last_seq = locked
        existing = store.find_append_ids(session_id, [p.append_id for p in batch])
        seqs: list[int] = []
        duplicates: list[bool] = []
        rows: list[NewMessage] = []
        for item in batch:
            if item.append_id in existing:
                seq, digest = existing[item.append_id]
                if digest != item.digest:
                    raise Conflict(f"append_id {item.append_id} was already used with a different payload (seq {seq})")
                seqs.append(seq)
                duplicates.append(True)
                continue
            last_seq += 1
            existing[item.append_id] = (last_seq, item.digest)
            rows.append(
                NewMessage(last_seq, item.append_id, item.role, item.payload, item.digest, item.message.created_at)
            )
            seqs.append(last_seq)
            duplicates.append(False)
        if rows:
            store.insert_messages(session_id, project_id, rows)
            store.set_last_seq(session_id, last_seq)
            SearchStore(conn).index_messages(session_id, project_id, [
                IndexRow(row.seq, row.role, row.created_at, docs[row.append_id]) for row in rows])
    return AppendManyResult(
        seqs=seqs,
        duplicates=duplicates,
        append_ids=[p.append_id for p in batch],
        redacted=sum(p.redacted for p in batch),
    )


def read(db: Database, session_id: str, *, after_seq: int, limit: int) -> Page:
    if not isinstance(after_seq, int) or after_seq < 0:
        raise Invalid("after_seq must be an integer ≥ 0")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise Invalid(f"limit must be an integer from 1 to {MAX_PAGE}")
    with db.transaction() as conn:
        store = Store(conn)
        segments = store.lineage(session_id)
        if not segments:
            raise NotFound(f"session {session_id} does not exist")
        rows = []
        for segment in reversed(segments):  # oldest ancestor first: its seqs come first
            if segment.upper is not None and segment.upper <= after_seq:
                continue
            rows.extend(store.read_range(segment, after_seq=after_seq, limit=limit + 1 - len(rows)))
            if len(rows) > limit:
                break
    has_more = len(rows) > limit
    rows = rows[:limit]
    messages = [
        Message.model_validate(
            {
                **row.payload,
                "session_id": session_id,
                "seq": row.seq,
                "append_id": row.append_id,
                "created_at": format_time(row.created_at),
                **({"inherited_from": row.session_id} if row.session_id != session_id else {}),
            }
        )
        for row in rows
    ]
    return Page(messages=messages, next_after_seq=rows[-1].seq if rows else after_seq, has_more=has_more)
