"""Sessions: create, list (keyset cursor), merge meta."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime
from typing import Any

from ..errors import Invalid, NotFound
from ..inputs import MAX_PROJECT_CHARS
from ..inputs import MAX_SESSIONS as MAX_LIST
from ..results import Session, SessionList
from ..store.core_store import Store
from ..store.db import Database
from .sanitize import Cleaner

SESSION_ID_PREFIX = "ses_"


def new_session_id() -> str:
    return f"{SESSION_ID_PREFIX}{uuid.uuid4()}"


def check_project(project_id: Any) -> str:
    if not isinstance(project_id, str) or not project_id.strip():
        raise Invalid("project_id must be a non-empty string")
    if len(project_id) > MAX_PROJECT_CHARS:
        raise Invalid(f"project_id must be at most {MAX_PROJECT_CHARS} characters")
    return project_id


def check_meta(meta: Any, *, field: str = "meta") -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise Invalid(f"{field} must be a JSON object")
    for key in ("title", "agent_source"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise Invalid(f"{field}.{key} must be a string")
    return meta


def create(db: Database, project_id: str, meta: dict[str, Any] | None, *, cleaner: Cleaner) -> Session:
    project_id = check_project(project_id)
    meta = clean_meta({k: v for k, v in check_meta(meta).items() if v is not None}, cleaner)
    with db.transaction() as conn:
        return Store(conn).insert_session(
            session_id=new_session_id(),
            project_id=project_id,
            agent_source=meta.get("agent_source"),
            title=meta.get("title"),
            meta=meta,
        )


def get(db: Database, session_id: str) -> Session:
    with db.transaction() as conn:
        session = Store(conn).get_session(session_id)
    if session is None:
        raise NotFound(f"session {session_id} does not exist")
    return session


def list_(
    db: Database, *, project_id: str | None, agent_source: str | None, limit: int, cursor: str | None
) -> SessionList:
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
        raise Invalid(f"limit must be an integer from 1 to {MAX_LIST}")
    position = decode_cursor(cursor) if cursor else None
    with db.transaction() as conn:
        sessions = Store(conn).list_sessions(
            project_id=project_id, agent_source=agent_source, cursor=position, limit=limit + 1
        )
    more = len(sessions) > limit
    sessions = [without_native(s) for s in sessions[:limit]]
    next_cursor = encode_cursor(sessions[-1]) if more else None
    return SessionList(sessions=sessions, next_cursor=next_cursor)


def without_native(session: Session) -> Session:
    """A listed session's meta without the native records an import keeps there (meta.native: a
    file's trailing lines, agent ids, …; read by export, not by someone choosing a session)."""
    if "native" not in session.meta:
        return session
    return session.model_copy(update={"meta": {k: v for k, v in session.meta.items() if k != "native"}})


def update_meta(db: Database, session_id: str, meta: Any, *, cleaner: Cleaner) -> Session:
    """Shallow merge: keys in `meta` replace stored ones; a key set to null is removed."""
    if not isinstance(meta, dict):
        raise Invalid("meta must be a JSON object")
    check_meta({k: v for k, v in meta.items() if v is not None})
    meta = clean_meta(meta, cleaner)
    set_ = {k: v for k, v in meta.items() if v is not None}
    remove = [k for k, v in meta.items() if v is None]
    columns = {k: meta[k] for k in ("title", "agent_source") if k in meta}
    with db.transaction() as conn:
        session = Store(conn).update_session_meta(session_id, set_=set_, remove=remove, columns=columns)
    if session is None:
        raise NotFound(f"session {session_id} does not exist")
    return session


def clean_meta(meta: dict[str, Any], cleaner: Cleaner) -> dict[str, Any]:
    """Session meta as it is stored: secrets redacted in every value, the title included."""
    return cleaner.clean_value(meta)[0]


def encode_cursor(session: Session) -> str:
    raw = json.dumps([session.created_at, session.session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created_at, session_id = json.loads(base64.urlsafe_b64decode(padded))
        return datetime.fromisoformat(created_at.replace("Z", "+00:00")), str(session_id)
    except (ValueError, TypeError) as exc:
        raise Invalid(f"cursor is not a cursor returned by list_sessions ({exc})") from None
