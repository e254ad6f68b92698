"""Work that could not be stored, kept on disk until a later run delivers it.

A capture hook must finish in time even when the database is frozen or down, and must not drop a
session the database refused (a project this token may not write, a revoked token):
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
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import Invalid
from .jsoncheck import check_shape
from .schema import MessageIn, NeutralSession

log = logging.getLogger(__name__)

MAX_BYTES = 256 * 1024 * 1024  # a spool file holds one run's capture; a bigger one is set aside unread
MAX_DEPTH = 200  # of the JSON: a message is a few levels below the file's own; deeper is not ours
UNREADABLE = ".unreadable"  # suffix of a file set aside; `<that name>.reason` says why
# What reading a damaged or hand-edited file can raise: no JSON, not UTF-8, a message the schema
# refuses (pydantic's ValidationError is a ValueError), missing keys, wrong types, or nesting the
# shape check let through that a parser still cannot take.
_BAD_FILE = (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, Invalid)


@dataclass(frozen=True)
class Unreadable:
    """A spool file set aside: kept for the user, never delivered, listed with its reason."""

    path: Path
    reason: str

    @property
    def name(self) -> str:
        return self.path.name.removesuffix(UNREADABLE).removesuffix(".json")

    def drop(self) -> None:
        self.path.unlink(missing_ok=True)
        _reason_file(self.path).unlink(missing_ok=True)


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
        """The files waiting, oldest first. A file that cannot be read (damaged, edited by hand, too
        big, nested too deep) is renamed to `<name>.unreadable` with the reason beside it, kept for
        the user and logged, and never blocks the others."""
        if not self.folder.is_dir():
            return []
        files = []
        for path in sorted(self.folder.glob("[0-9]*.json")):
            try:
                files.append(SpoolFile(path))
            except _BAD_FILE as exc:
                _set_aside(path, _why(exc))
        return files

    def unreadable(self) -> list[Unreadable]:
        """The files set aside, oldest first, each with the reason it could not be read."""
        if not self.folder.is_dir():
            return []
        return [Unreadable(p, _read_reason(p)) for p in sorted(self.folder.glob(f"[0-9]*.json{UNREADABLE}"))]

    def count(self) -> int:
        return len(self.pending())


class SpoolFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        data = _read(path)
        project, reason, sessions = data.get("project"), data.get("reason"), data["sessions"]
        if not isinstance(project, str | None) or not isinstance(reason, str | None) or not isinstance(sessions, list):
            raise TypeError("project and reason must be text, sessions a list")
        self.project: str | None = project
        self.reason: str = reason or "the database was unreachable"
        self.sessions = [_load(s) for s in sessions]

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


def _read(path: Path) -> dict[str, Any]:
    """The file's JSON object, bounded: its size is checked before it is read and its nesting
    before it is parsed (a file of 100,000 nested lists would exhaust the parser's stack)."""
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_BYTES:
            raise ValueError(f"{size} bytes, more than a spool file holds ({MAX_BYTES})")
        raw = fh.read(MAX_BYTES + 1)
    check_shape(raw, max_depth=MAX_DEPTH, max_values=sys.maxsize, what="the spool file")
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise TypeError("not a JSON object")
    return data


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:300] or type(exc).__name__
    return text if isinstance(exc, OSError | Invalid) else f"{type(exc).__name__}: {text}"


def _set_aside(path: Path, reason: str) -> None:
    kept = path.with_name(path.name + UNREADABLE)
    log.warning("spool file %s cannot be read (%s); kept as %s, not delivered", path, reason, kept.name)
    try:
        _reason_file(kept).write_text(reason + "\n", encoding="utf-8")
        path.replace(kept)
    except OSError as exc:  # a read-only folder: it stays unread under its name, the others go on
        log.warning("spool file %s could not be set aside: %s", path, exc)


def _reason_file(kept: Path) -> Path:
    return kept.with_name(kept.name + ".reason")


def _read_reason(kept: Path) -> str:
    try:
        with _reason_file(kept).open("rb") as fh:
            return fh.read(1000).decode("utf-8", errors="replace").strip() or "unknown"
    except OSError:
        return "unknown (set aside by an earlier version)"


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
    if not (isinstance(data.get("agent"), str) and isinstance(data.get("native_id"), str)
            and isinstance(data.get("meta") or {}, dict) and isinstance(data.get("messages"), list)):
        raise TypeError("a session needs agent and native_id (text), meta (an object) and messages (a list)")
    return NeutralSession(agent=data["agent"], native_id=data["native_id"], meta=data.get("meta") or {},
                          parent_native_id=data.get("parent_native_id"),
                          parent_tool_call_id=data.get("parent_tool_call_id"),
                          messages=[MessageIn.model_validate(m) for m in data["messages"]])
