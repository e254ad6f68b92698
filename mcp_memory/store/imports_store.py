"""SQL for importing native sessions (kept apart from the core store)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..errors import Conflict
from ..results import Session
from .core_store import Store
from .sql import first_row, q


def ensure_session(
    conn: psycopg.Connection, *, session_id: str, project_id: str, agent_source: str | None, title: str | None,
    meta: dict[str, Any],
) -> tuple[Session, bool]:
    """The session with this id, created if absent; True when it was created now."""
    cur = conn.execute(q("session_insert_if_absent"), {
        "session_id": session_id, "project_id": project_id, "agent_source": agent_source, "title": title,
        "meta": Jsonb(meta),
    })
    created = cur.fetchone() is not None
    session = Store(conn).get_session(session_id)
    if session is None:  # the derived id is taken in a project this role cannot read
        raise Conflict(f"session {session_id} exists in another project")
    return session, created


@dataclass(frozen=True)
class Relay:
    """A native session written by `export`: it starts with `carried` (append_ids, in order), the
    source session's history up to `up_to_seq`, where snapshot `snapshot_id` was taken."""

    project_id: str
    agent: str
    native_id: str
    snapshot_id: int
    session_id: str
    carried: list[str]
    up_to_seq: int = 0


def record_relay(conn: psycopg.Connection, *, session_id: str, agent: str, native_id: str,
                 carried: list[str]) -> Relay:
    row = conn.execute(q("relay_record"), {"session_id": session_id, "agent": agent, "native_id": native_id,
                                           "carried": carried}).fetchone()
    return Relay(*first_row(row, "mm_record_relay"))


def find_relays(conn: psycopg.Connection, *, agent: str, native_id: str) -> list[Relay]:
    rows = conn.execute(q("relay_find"), {"agent": agent, "native_id": native_id}).fetchall()
    return [Relay(*row) for row in rows]


def fork_for_relay(conn: psycopg.Connection, relay: Relay, *, session_id: str, agent_source: str,
                   title: str | None, meta: dict[str, Any]) -> tuple[Session, bool]:
    """The relay's fork with this id, created from the relay's snapshot if absent; True when created."""
    store = Store(conn)
    existing = store.get_session(session_id)
    if existing is not None:
        return existing, False
    return store.fork_session(snapshot_id=relay.snapshot_id, session_id=session_id, agent_source=agent_source,
                              title=title, meta=meta), True
