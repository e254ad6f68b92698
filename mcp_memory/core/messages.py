"""Appending and reading messages: per-session gap-free seq, idempotency, fork-aware paging."""

from __future__ import annotations

import gc
import hashlib
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
from psycopg import Connection
from pydantic import ValidationError

from .. import scaffolding
from ..errors import Conflict, Invalid, NotFound
from ..inputs import MAX_BATCH, MAX_PAGE, VIEWS
from ..results import AppendManyResult, Page, Session, View
from ..schema import Message, MessageIn, format_time, parse_message, size_error
from ..store.core_store import COPY_FROM, AppendRaced, NewMessage, Store, StoredRow, copy_allowed
from ..store.db import Database
from . import conversation
from .sanitize import Cleaner


@dataclass(slots=True)
class Prepared:
    append_id: str
    role: str
    payload: dict[str, Any]
    payload_json: str  # canonical JSON: hashed, size-checked and sent to the database as is
    digest: bytes
    created_at: datetime | None  # the client's time, when it gave one
    redacted: int


def prepare(raw: Any, *, max_bytes: int, cleaner: Cleaner, field: str = "messages") -> list[Prepared]:
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
            cleaned, redacted = cleaner.clean(payload)
            if cleaned is not payload:  # the walk returns the payload itself when it changed nothing
                payload = cleaned
                canonical = canonical_json(payload)
                text = canonical.decode()
        if len(canonical) > max_bytes:
            name = field if field == "message" else f"{field}[{index}]"
            raise Invalid(size_error(payload, field=name, size=len(canonical), max_bytes=max_bytes))
        prepared.append(
            Prepared(
                append_id=cleaner.clean_id(message.append_id) if message.append_id else f"gen_{uuid.uuid4().hex}",
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
    whatever key order a client or jsonb used. The database computes the same bytes from a stored
    payload (mm_canonical_json, migration 0007): numbers are written as PostgreSQL's numeric type
    prints them, so a float in exponent form (1e-07) becomes plain digits (0.0000001)."""
    try:
        text = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):  # integers beyond 64 bits
        return _canonical_slow(payload)
    if _EXPONENT.search(text) or b"-0.0" in text:  # rare: maybe a float PostgreSQL prints otherwise
        return _canonical_slow(payload)
    return text


_EXPONENT = re.compile(rb"[0-9]e[-+]?[0-9]")


def _canonical_slow(payload: Any) -> bytes:
    return orjson.dumps(_as_numeric(payload), option=orjson.OPT_SORT_KEYS)


def _as_numeric(value: Any) -> Any:
    """Numbers as PostgreSQL's numeric prints them (plain digits, no -0), as pre-rendered JSON."""
    if isinstance(value, float):
        text = format(Decimal(repr(value)), "f")
        return orjson.Fragment(text.lstrip("-") if Decimal(text) == 0 else text)
    if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**64:
        return orjson.Fragment(str(value))
    if isinstance(value, dict):
        return {k: _as_numeric(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_numeric(v) for v in value]
    return value


def payload_digest(payload: dict[str, Any]) -> bytes:
    return hashlib.sha256(canonical_json(payload)).digest()


def append(db: Database, session_id: str, batch: list[Prepared]) -> AppendManyResult:
    """Store a batch in one transaction through the database's append function, which allocates
    seq = last_seq + 1 … under the session row lock and checks append_ids and payload hashes
    (migration 0007). The search index follows in a transaction of its own (core/indexer.py).

    An owner's big batch (an import into the embedded default) is copied instead: see _copy."""
    if len(batch) >= COPY_FROM:
        try:
            with db.transaction() as conn:
                if copy_allowed(conn):
                    return _copy(conn, session_id, batch)
        except AppendRaced:
            pass  # an append_id stored meanwhile: the append function sees it as a duplicate
    with db.transaction() as conn:
        stored = Store(conn).append_many(session_id, [_new(p) for p in batch])
    return AppendManyResult(
        seqs=[seq for seq, _ in stored],
        duplicates=[duplicate for _, duplicate in stored],
        append_ids=[p.append_id for p in batch],
        redacted=sum(p.redacted for p in batch),
    )


def append_in(conn: Connection, session_id: str, batch: list[Prepared]) -> AppendManyResult:
    """`append` inside the caller's transaction (an import stores a session and all its messages in
    one, core/imports.py); the caller submits the session to the search index after its commit."""
    if len(batch) >= COPY_FROM and copy_allowed(conn):
        try:
            with conn.transaction():  # a savepoint: a raced append_id leaves the rest of the transaction
                return _copy(conn, session_id, batch)
        except AppendRaced:
            pass
    stored = Store(conn).append_many(session_id, [_new(p) for p in batch])
    return AppendManyResult(seqs=[seq for seq, _ in stored], duplicates=[duplicate for _, duplicate in stored],
                            append_ids=[p.append_id for p in batch], redacted=sum(p.redacted for p in batch))


def _new(item: Prepared, seq: int = 0) -> NewMessage:
    return NewMessage(seq, item.append_id, item.role, item.payload_json, item.digest, item.created_at)


def _copy(conn: Connection, session_id: str, batch: list[Prepared]) -> AppendManyResult:
    """COPY, for an owner: the session row lock, the batch's stored append_ids (duplicates or
    conflicts), then the new rows at last_seq + 1 …, all in the caller's transaction."""
    store = Store(conn)
    locked = store.lock_session(session_id, [p.append_id for p in batch])
    if locked is None:
        raise NotFound(f"session {session_id} does not exist")
    if locked.retired:
        raise Conflict(f"session {session_id} belongs to month {locked.part_month:%Y-%m}, which has retired from "
                       "the hot tables: append to a new session")
    last_seq, existing = locked.last_seq, locked.existing
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
        rows.append(_new(item, last_seq))
        seqs.append(last_seq)
        duplicates.append(False)
    if rows:
        store.copy_messages(session_id, locked.project_id, rows, last_seq=last_seq, now=locked.now,
                            part_month=locked.part_month)
    return AppendManyResult(seqs=seqs, duplicates=duplicates, append_ids=[p.append_id for p in batch],
                            redacted=sum(p.redacted for p in batch))


def read(
    db: Database, session_id: str, *, after_seq: int, limit: int, include_native: bool = False,
    view: View = "conversation",
) -> Page:
    """A page of the session's history after `after_seq` (a fork: its parent's first), in the
    conversation view (core/conversation.py) or the full one. Without `include_native`, messages
    carry the neutral fields only: metadata.native is left out."""
    if not isinstance(after_seq, int) or after_seq < 0:
        raise Invalid("after_seq must be an integer ≥ 0")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise Invalid(f"limit must be an integer from 1 to {MAX_PAGE}")
    if view not in VIEWS:
        raise Invalid(f"view must be one of {', '.join(VIEWS)}")
    with db.transaction() as conn:
        store = Store(conn)
        segments = store.lineage(session_id)
        if not segments:
            raise NotFound(f"session {session_id} does not exist")
        rows: list[StoredRow] = []
        for segment in reversed(segments):  # oldest ancestor first: its seqs come first
            if segment.upper is not None and segment.upper <= after_seq:
                continue
            rows.extend(store.read_range(segment, after_seq=after_seq, limit=limit + 1 - len(rows)))
            if len(rows) > limit:
                break
        holders = {s.session_id: store.get_session(s.session_id) for s in segments} if view == "conversation" else {}
    has_more = len(rows) > limit
    rows = rows[:limit]
    next_after_seq = rows[-1].seq if rows else after_seq
    if view == "conversation":
        return _conversation(session_id, rows, holders, include_native=include_native,
                             next_after_seq=next_after_seq, has_more=has_more)
    messages = [
        Message.model_validate(
            {
                **(row.payload if include_native else _neutral(row.payload)),
                "session_id": session_id,
                "seq": row.seq,
                "append_id": row.append_id,
                "created_at": format_time(row.created_at),
                **({"inherited_from": row.session_id} if row.session_id != session_id else {}),
            }
        )
        for row in rows
    ]
    return Page(messages=messages, next_after_seq=next_after_seq, has_more=has_more)


def _conversation(
    session_id: str, rows: list[StoredRow], holders: dict[str, Session | None], *, include_native: bool,
    next_after_seq: int, has_more: bool,
) -> Page:
    session = holders[session_id]
    if session is None:  # removed between the lineage and the read: as if it had never been there
        raise NotFound(f"session {session_id} does not exist")
    turns = []
    calls = scaffolding.memory_calls(row.payload for row in rows)
    hidden = 0
    for row in rows:
        if scaffolding.message_kind(row.payload) is not None:
            hidden += 1
            continue
        holder = holders.get(row.session_id)
        agent = holder.agent_source if holder is not None else None
        turn = conversation.turn(row.payload, seq=row.seq, created_at=format_time(row.created_at),
                                 agent=agent if agent != session.agent_source else None,
                                 echo=scaffolding.echo_tool(row.payload, calls))
        if include_native:
            turn.native = (row.payload.get("metadata") or {}).get("native")
        turns.append(turn)
    return Page(session=conversation.head(session), messages=turns, next_after_seq=next_after_seq,
                has_more=has_more, scaffolding=hidden or None)


def _neutral(payload: dict[str, Any]) -> dict[str, Any]:
    metadata = payload.get("metadata")
    if not isinstance(metadata, dict) or "native" not in metadata:
        return payload
    return {**payload, "metadata": {k: v for k, v in metadata.items() if k != "native"}}
