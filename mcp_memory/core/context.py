"""Session context: key/value facts of a session — selected stack, constraints,
related docs. Values are JSON; every set keeps the previous values as history."""

from __future__ import annotations

import json
from typing import Any

from ..errors import Invalid, NotFound
from ..inputs import MAX_KEY
from ..memory_results import Agent, ContextOut, ContextSet
from ..store.core_store import Store
from ..store.db import Database
from ..store.memory_store import MemoryStore
from .sanitize import Cleaner

MAX_VALUE_BYTES = 64 * 1024


def check_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise Invalid("key must be a non-empty string")
    if len(key) > MAX_KEY:
        raise Invalid(f"key must be at most {MAX_KEY} characters")
    return key


def set_(db: Database, session_id: str, key: Any, value: Any, *, cleaner: Cleaner) -> ContextSet:
    key = check_key(key)
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        raise Invalid("value must be JSON (a string, number, boolean, list or object)") from None
    if size > MAX_VALUE_BYTES:
        raise Invalid(f"value is {size} bytes; at most {MAX_VALUE_BYTES}")
    # the key names the value: a string under `db_password` is judged as a secret; a key that is
    # itself a secret is stored redacted (the same key always gives the same stored key)
    ((key, value),) = cleaner.clean_value({key: value})[0].items()
    with db.transaction() as conn:
        stored = MemoryStore(conn).set_context(session_id, key, value)
    if stored is None:
        raise NotFound(f"session {session_id} does not exist")
    return ContextSet(ok=True, revision=stored[0])


def get(db: Database, session_id: str, key: Any = None) -> ContextOut:
    """Current values (all keys, or one); with a key, also its history."""
    if key is not None:
        key = check_key(key)
    with db.transaction() as conn:
        if Store(conn).get_session(session_id) is None:
            raise NotFound(f"session {session_id} does not exist")
        store = MemoryStore(conn)
        current = store.current_context(session_id, key)
        history = store.context_history(session_id, key) if key is not None else None
    return ContextOut(context={entry.key: entry.value for entry in current}, history=history)


def list_agents(db: Database) -> list[Agent]:
    """Agents known from sessions' agent_source (kept by a trigger), with their descriptions."""
    with db.transaction() as conn:
        return MemoryStore(conn).list_agents()


def describe_agent(db: Database, name: Any, description: Any, *, cleaner: Cleaner) -> Agent:
    if not isinstance(name, str) or not name.strip() or not isinstance(description, str):
        raise Invalid("an agent needs a non-empty name and a description string")
    description = cleaner.clean_text(description)[0] or ""
    with db.transaction() as conn:
        return MemoryStore(conn).describe_agent(name, description)
