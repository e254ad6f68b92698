"""Work that could not be stored, kept on disk until a later run delivers it.

A capture hook must finish in time even when the database is frozen or down, and must not drop a
session the database refused (a project this token may not write, a project file with a bad name):
what it could not store is written here with the reason (one JSON file per failed run, written to a
temporary name and renamed, so a killed run leaves no half file). The next run delivers the oldest
files first; a file whose sessions are stored is removed, one whose sessions are refused again is
kept with the new reason (`mcp-memory spool` lists them, `mcp-memory projects map` fixes the usual
cause). Files are private to the user (0600 in a 0700 folder): they hold conversation text.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

from .schema import MessageIn, NeutralSession

log = logging.getLogger(__name__)


class Spool:
    """Sessions waiting for the database, one JSON file per failed sync."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def add(self, sessions: list[NeutralSession], *, project: str | None, reason: str) -> None:
        if not sessions:
            return
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write(self.folder / f"{time.time_ns()}-{uuid.uuid4().hex[:8]}.json", sessions, project=project, reason=reason)

    def pending(self) -> list[SpoolFile]:
        """The files waiting, oldest first. A file that cannot be read (damaged, edited by hand) is
        renamed to `<name>.unreadable`, kept for the user and logged, and never blocks the others."""
        if not self.folder.is_dir():
            return []
        files = []
        for path in sorted(self.folder.glob("[0-9]*.json")):
            try:
                files.append(SpoolFile(path))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("spool file %s cannot be read (%s); kept as %s.unreadable", path, exc, path.name)
                path.replace(path.with_name(path.name + ".unreadable"))
        return files

    def count(self) -> int:
        return len(self.pending())


class SpoolFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        data = json.loads(path.read_text())
        self.project: str | None = data.get("project")
        self.reason: str = data.get("reason") or "the database was unreachable"
        self.sessions = [_load(s) for s in data["sessions"]]

    @property
    def name(self) -> str:
        return self.path.stem

    def delivered(self) -> None:
        self.path.unlink(missing_ok=True)

    def retarget(self, project: str) -> None:
        """Its sessions go to `project` when next delivered."""
        _write(self.path, self.sessions, project=project, reason=self.reason)
        self.project = project

    def refused(self, sessions: list[NeutralSession], reason: str) -> None:
        """Only `sessions` are left, refused for `reason`: the file keeps them (and its place)."""
        if not sessions:
            self.delivered()
            return
        _write(self.path, sessions, project=self.project, reason=reason)
        self.sessions, self.reason = sessions, reason


def _write(path: Path, sessions: list[NeutralSession], *, project: str | None, reason: str) -> None:
    data = {"project": project, "reason": reason, "sessions": [_dump(s) for s in sessions]}
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(data, ensure_ascii=False))
    os.replace(tmp, path)


def _dump(session: NeutralSession) -> dict[str, Any]:
    return {"agent": session.agent, "native_id": session.native_id, "meta": session.meta,
            "parent_native_id": session.parent_native_id, "parent_tool_call_id": session.parent_tool_call_id,
            "messages": [m.model_dump(mode="json", exclude_none=True) for m in session.messages]}


def _load(data: dict[str, Any]) -> NeutralSession:
    return NeutralSession(agent=data["agent"], native_id=data["native_id"], meta=data.get("meta") or {},
                          parent_native_id=data.get("parent_native_id"),
                          parent_tool_call_id=data.get("parent_tool_call_id"),
                          messages=[MessageIn.model_validate(m) for m in data["messages"]])
