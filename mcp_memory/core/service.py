"""The core service: the one place with business rules, shared by MCP, REST, the CLI and the
library API. Transports call these methods and format the results; nothing here knows a transport."""

from __future__ import annotations

from typing import Any

from ..config import Settings
from ..records import AppendManyResult, AppendResult, Forked, Page, Session, SessionList, Snapshot
from ..store.db import Database
from . import messages, sessions, snapshots
from .sanitize import Cleaner


class Service:
    def __init__(self, db: Database, *, cleaner: Cleaner | None = None) -> None:
        self.db = db
        self.settings: Settings = db.settings
        self.cleaner = cleaner or Cleaner()

    # sessions
    def create_session(self, project_id: str, meta: dict[str, Any] | None = None) -> Session:
        return sessions.create(self.db, project_id, meta)

    def get_session(self, session_id: str) -> Session:
        return sessions.get(self.db, session_id)

    def list_sessions(
        self, *, project_id: str | None = None, agent_source: str | None = None, limit: int = 50,
        cursor: str | None = None,
    ) -> SessionList:
        return sessions.list_(self.db, project_id=project_id, agent_source=agent_source, limit=limit, cursor=cursor)

    def update_session_meta(self, session_id: str, meta: dict[str, Any]) -> Session:
        return sessions.update_meta(self.db, session_id, meta)

    # messages
    def append_message(self, session_id: str, message: Any) -> AppendResult:
        batch = messages.prepare(message, max_bytes=self.settings.max_message_bytes, cleaner=self.cleaner,
                                 field="message")
        result = messages.append(self.db, session_id, batch)
        return AppendResult(seq=result.seqs[0], duplicate=result.duplicates[0],
                            append_id=result.append_ids[0], redacted=result.redacted)

    def append_messages(self, session_id: str, items: Any) -> AppendManyResult:
        batch = messages.prepare(items, max_bytes=self.settings.max_message_bytes, cleaner=self.cleaner)
        return messages.append(self.db, session_id, batch)

    def read_session(self, session_id: str, *, after_seq: int = 0, limit: int = 100) -> Page:
        return messages.read(self.db, session_id, after_seq=after_seq, limit=limit)

    # snapshots and forks
    def create_snapshot(self, session_id: str, commit_msg: str = "", meta: dict[str, Any] | None = None) -> Snapshot:
        return snapshots.create(self.db, session_id, commit_msg, meta)

    def list_snapshots(self, session_id: str) -> list[Snapshot]:
        return snapshots.list_(self.db, session_id)

    def load_snapshot(self, snapshot_id: int, meta: dict[str, Any] | None = None) -> Forked:
        return snapshots.fork(self.db, snapshot_id, meta)
