"""Appending and reading messages: per-session gap-free seq, idempotency, fork-aware paging."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import Conflict, Invalid, NotFound
from ..models import Message, MessageIn, format_time, parse_message, size_error
from ..records import AppendManyResult, Page
from ..search.index import index_message
from ..store.db import Database
from ..store.repo import AppendRaced, NewMessage, Store
from ..store.search_repo import IndexRow, SearchStore
from .sanitize import Cleaner

MAX_BATCH = 10_000
MAX_PAGE = 1000


@dataclass(frozen=True)
class Prepared:
    append_id: str
    role: str
    payload: dict[str, Any]
    payload_json: str  # canonical JSON: hashed, size-checked and sent to the database as is
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
        message = parse_message(item, field=name, max_bytes=None)
        payload = message.payload()
        payload.pop("append_id", None)
        payload, redacted = cleaner.clean(payload)
        canonical = canonical_json(payload)
        if len(canonical) > max_bytes:
            raise Invalid(size_error(payload, field=name, size=len(canonical), max_bytes=max_bytes))
        prepared.append(
            Prepared(
                append_id=message.append_id or f"gen_{uuid.uuid4().hex}",
                role=message.role,
                payload=payload,
                payload_json=canonical.decode(),
                digest=hashlib.sha256(canonical).digest(),
                message=message,
                redacted=redacted,
            )
        )
    return prepared


def canonical_json(payload: dict[str, Any]) -> bytes:
    """Sorted keys, no spaces, UTF-8: the same payload always gives the same bytes (and hash),
    whatever key order a client or jsonb used."""
    try:
        return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):  # integers beyond 64 bits: the slow, exact path
        return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def payload_digest(payload: dict[str, Any]) -> bytes:
    return hashlib.sha256(canonical_json(payload)).digest()


def append(db: Database, session_id: str, batch: list[Prepared]) -> AppendManyResult:
    """Store a batch in one transaction. Seq = last_seq + 1 … under the session row lock.
    The search index is filled in the same transaction; tokenizing happens before it opens."""
    docs = {item.append_id: index_message(item.payload) for item in batch}
    try:
        return _append_once(db, session_id, batch, docs)
    except AppendRaced:
        # Another transaction stored one of these append_ids while we waited for the session
        # lock; our snapshot could not see it. Once more: now it is visible as a duplicate.
        return _append_once(db, session_id, batch, docs)


def _append_once(db: Database, session_id: str, batch: list[Prepared], docs: dict[str, Any]) -> AppendManyResult:
    with db.transaction() as conn:
        store = Store(conn)
        locked = store.lock_session(session_id, [p.append_id for p in batch])
        if locked is None:
            raise NotFound(f"session {session_id} does not exist")
        project_id, last_seq, existing = locked
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
            rows.append(NewMessage(last_seq, item.append_id, item.role, item.payload_json, item.digest,
                                   item.message.created_at))
            seqs.append(last_seq)
            duplicates.append(False)
        if rows:
            with store.final_writes(commit=len(rows) == 1):  # one round trip for a single message
                store.insert_messages(session_id, project_id, rows, last_seq=last_seq)
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
