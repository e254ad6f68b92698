"""Snapshots are pointers (session, up_to_seq); forks are new sessions that share history."""

from __future__ import annotations

from typing import Any

from ..errors import Invalid, NotFound
from ..inputs import MAX_TEXT as MAX_COMMIT_MSG
from ..results import Forked, Snapshot
from ..store.core_store import Store
from ..store.db import Database
from .sanitize import Cleaner
from .sessions import check_meta, clean_meta, new_session_id


def create(db: Database, session_id: str, commit_msg: str, meta: dict[str, Any] | None = None, *,
           cleaner: Cleaner) -> Snapshot:
    """The pointer, its export job and the archiver's wake-up NOTIFY, in one transaction."""
    if not isinstance(commit_msg, str):
        raise Invalid("commit_msg must be a string")
    if len(commit_msg) > MAX_COMMIT_MSG:
        raise Invalid(f"commit_msg must be at most {MAX_COMMIT_MSG} characters")
    # the commit message and meta go into the git archive too: redacted before either sees them
    commit_msg = cleaner.clean_text(commit_msg)[0] or ""
    meta = clean_meta(check_meta(meta), cleaner)
    with db.transaction() as conn:
        return Store(conn).insert_snapshot(session_id, commit_msg, meta)


def list_(db: Database, session_id: str) -> list[Snapshot]:
    with db.transaction() as conn:
        store = Store(conn)
        if store.get_session(session_id) is None:
            raise NotFound(f"session {session_id} does not exist")
        return store.list_snapshots(session_id)


def fork(db: Database, snapshot_id: Any, meta: dict[str, Any] | None = None, *, cleaner: Cleaner) -> Forked:
    """Always a NEW session: the parent's history up to the snapshot, then its own (zero-copy)."""
    snapshot_id = check_snapshot_id(snapshot_id)
    meta = clean_meta({k: v for k, v in check_meta(meta).items() if v is not None}, cleaner)
    with db.transaction() as conn:
        store = Store(conn)
        snapshot = store.get_snapshot(snapshot_id)
        if snapshot is None:
            raise NotFound(f"snapshot {snapshot_id} does not exist")
        parent = store.get_session(snapshot.session_id)
        if parent is None:  # a snapshot row of a session this role cannot read
            raise NotFound(f"snapshot {snapshot_id} does not exist")
        merged = {**parent.meta, **meta, "forked_from": {"session_id": parent.session_id,
                                                          "snapshot_id": snapshot_id,
                                                          "seq": snapshot.up_to_seq}}
        child = store.fork_session(snapshot_id=snapshot_id, session_id=new_session_id(),
                                   agent_source=merged.get("agent_source"), title=merged.get("title"), meta=merged)
    return Forked(session_id=child.session_id, parent_snapshot_id=snapshot_id)


def check_snapshot_id(value: Any) -> int:
    if isinstance(value, str) and value.removeprefix("snapshot-").isdigit():
        value = int(value.removeprefix("snapshot-"))
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise Invalid("snapshot_id must be a positive integer")
    return value
