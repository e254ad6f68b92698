"""Appending and reading messages: per-session gap-free seq, idempotency, fork-aware paging."""

from __future__ import annotations

import gc
import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from pydantic import ValidationError

from ..errors import Conflict, Invalid, NotFound
from ..models import Message, MessageIn, format_time, parse_message, size_error
from ..records import AppendManyResult, Page
from ..store.db import Database
from ..store.repo import AppendRaced, NewMessage, Store
from .sanitize import Cleaner

MAX_BATCH = 10_000
MAX_PAGE = 1000


@dataclass(slots=True)
class Prepared:
    append_id: str
    role: str
    payload: dict[str, Any]
    payload_json: str  # canonical JSON: hashed, size-checked and sent to the database as is
    digest: bytes
    created_at: datetime | None  # the client's time, when it gave one
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
    # A big batch allocates ~10 objects per message and keeps them all: the collector's passes over
    # the process meanwhile find no garbage (a fifth of a 10k batch's time). Paused, then restored.
    pause = len(raw) >= 1000 and gc.isenabled()
    if pause:
        gc.disable()
    try:
        return _prepare(raw, max_bytes=max_bytes, cleaner=cleaner, field=field)
    finally:
        if pause:
            gc.enable()


def _prepare(raw: Sequence[Any], *, max_bytes: int, cleaner: Cleaner, field: str) -> list[Prepared]:
    prepared = []
    validate = MessageIn.model_validate
    for index, item in enumerate(raw):
        try:  # the common case first; a bad message is parsed again below for an error naming it
            message = validate(item) if type(item) is dict else None
        except ValidationError:
            message = None
        if message is None:
            name = field if field == "message" else f"{field}[{index}]"
            message = parse_message(item, field=name, max_bytes=None)
        payload = message.payload()
        payload.pop("append_id", None)
        canonical = canonical_json(payload)
        text = canonical.decode()
        redacted = 0
        if cleaner.may_change(text):  # most payloads: nothing to clean, no walk
            payload, redacted = cleaner.clean(payload)
            canonical = canonical_json(payload)
            text = canonical.decode()
        if len(canonical) > max_bytes:
            name = field if field == "message" else f"{field}[{index}]"
            raise Invalid(size_error(payload, field=name, size=len(canonical), max_bytes=max_bytes))
        prepared.append(
            Prepared(
                append_id=message.append_id or f"gen_{uuid.uuid4().hex}",
                role=message.role,
                payload=payload,
                payload_json=text,
                digest=hashlib.sha256(canonical).digest(),
                created_at=message.created_at,
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


OPTIMISTIC_FROM = 64  # batches at least this big are first stored without looking up their append_ids


def append(db: Database, session_id: str, batch: list[Prepared]) -> AppendManyResult:
    """Store a batch in one transaction. Seq = last_seq + 1 … under the session row lock.
    The search index follows in a transaction of its own (core/indexer.py).

    A big batch (an import) is usually all new: it is first stored without looking up its
    append_ids, and UNIQUE (session_id, append_id) catches one that is not; then it is stored
    again the careful way, where the stored ones come back as duplicates."""
    look_up = len(batch) < OPTIMISTIC_FROM or len({p.append_id for p in batch}) < len(batch)
    for _ in range(2):
        try:
            return _append_once(db, session_id, batch, look_up=look_up)
        except AppendRaced:
            # A stored append_id, or another transaction stored one while we waited for the
            # session lock (our snapshot could not see it): now it is visible as a duplicate.
            look_up = True
    return _append_once(db, session_id, batch, look_up=True)


def _append_once(db: Database, session_id: str, batch: list[Prepared], *, look_up: bool) -> AppendManyResult:
    if len(batch) == 1:
        return _append_single(db, session_id, batch[0])
    with db.transaction() as conn:
        store = Store(conn)
        locked = store.lock_session(session_id, [p.append_id for p in batch] if look_up else [])
        if locked is None:
            raise NotFound(f"session {session_id} does not exist")
        project_id, last_seq, existing = locked.project_id, locked.last_seq, locked.existing
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
                                   item.created_at))
            seqs.append(last_seq)
            duplicates.append(False)
        if rows:
            with store.final_writes(commit=len(rows) == 1):  # one round trip for a single message
                store.insert_messages(session_id, project_id, rows, last_seq=last_seq, now=locked.now)
    return AppendManyResult(
        seqs=seqs,
        duplicates=duplicates,
        append_ids=[p.append_id for p in batch],
        redacted=sum(p.redacted for p in batch),
    )


def _append_single(db: Database, session_id: str, item: Prepared) -> AppendManyResult:
    """The common case, an agent's turn: one statement and its COMMIT in one round trip."""
    with db.transaction() as conn:
        project_id, seq, stored_seq, stored_hash = Store(conn).append_one(session_id, NewMessage(
            0, item.append_id, item.role, item.payload_json, item.digest, item.created_at))
    if project_id is None:
        raise NotFound(f"session {session_id} does not exist")
    duplicate = seq is None
    if duplicate and stored_hash != item.digest:
        raise Conflict(f"append_id {item.append_id} was already used with a different payload (seq {stored_seq})")
    return AppendManyResult(seqs=[stored_seq if duplicate else seq], duplicates=[duplicate],
                            append_ids=[item.append_id], redacted=item.redacted)


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
