"""Work that could not reach the database, kept on disk until a later run delivers it.

A capture hook must finish in time even when the database is frozen or down: what it could not
store is written here (one JSON file per failed run, written to a temporary name and renamed, so a
killed run leaves no half file) and the next run delivers the oldest files first, then removes them.
Files are private to the user (0600 in a 0700 folder): they hold conversation text.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from .schema import MessageIn, NeutralSession


class Spool:
    """Sessions waiting for the database, one JSON file per failed sync."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def add(self, sessions: list[NeutralSession], *, project: str | None) -> None:
        if not sessions:
            return
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = {"project": project, "sessions": [_dump(s) for s in sessions]}
        name = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}.json"
        tmp = self.folder / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(data, ensure_ascii=False))
        os.replace(tmp, self.folder / name)

    def pending(self) -> list[SpoolFile]:
        if not self.folder.is_dir():
            return []
        return [SpoolFile(p) for p in sorted(self.folder.glob("[0-9]*.json"))]

    def count(self) -> int:
        return len(self.pending())


class SpoolFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        data = json.loads(path.read_text())
        self.project = data.get("project")
        self.sessions = [_load(s) for s in data["sessions"]]

    def delivered(self) -> None:
        self.path.unlink(missing_ok=True)


def _dump(session: NeutralSession) -> dict[str, Any]:
    return {"agent": session.agent, "native_id": session.native_id, "meta": session.meta,
            "parent_native_id": session.parent_native_id, "parent_tool_call_id": session.parent_tool_call_id,
            "messages": [m.model_dump(mode="json", exclude_none=True) for m in session.messages]}


def _load(data: dict[str, Any]) -> NeutralSession:
    return NeutralSession(agent=data["agent"], native_id=data["native_id"], meta=data.get("meta") or {},
                          parent_native_id=data.get("parent_native_id"),
                          parent_tool_call_id=data.get("parent_tool_call_id"),
                          messages=[MessageIn.model_validate(m) for m in data["messages"]])
