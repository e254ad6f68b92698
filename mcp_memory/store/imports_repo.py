"""SQL for importing native sessions (kept apart from the core store)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..errors import Conflict
from ..records import Session
from .repo import Store
from .sql import q


def ensure_session(
    conn: psycopg.Connection, *, session_id: str, project_id: str, agent_source: str | None, title: str | None,
    meta: dict[str, Any],
) -> tuple[Session, bool]:
    """The session with this id, created if absent; True when it was created now."""
    cur = conn.execute(q("insert_session_if_absent"), {
        "session_id": session_id, "project_id": project_id, "agent_source": agent_source, "title": title,
        "meta": Jsonb(meta),
    })
    created = cur.fetchone() is not None
    session = Store(conn).get_session(session_id)
    if session is None:  # the derived id is taken in a project this role cannot read
        raise Conflict(f"session {session_id} exists in another project")
    return session, created
