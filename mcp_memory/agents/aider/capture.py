"""Capture of Aider's history files: what each file gained since the last run, by byte offset.

Aider only appends to its history (README.md in this package, §Capture), so a byte offset is an
exact cursor: a run reads from where the last one stopped, up to the last complete block, and the
messages it returns carry the append_ids a full read gives them (derived from each block's offset).
A file that got shorter or starts differently was replaced: it is read again from the start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import NeutralSession
from .adapter import history_files, read_file

CURSOR_VERSION = 1


def read_new(folder: Path, cursor: dict[str, Any] | None, *, only: Path | None = None
             ) -> tuple[list[NeutralSession], dict[str, Any]]:
    """The sessions of the folder's history files (or `only`) with only their new blocks, and the
    new cursor (one per file, by file name)."""
    known = cursor.get("files") if cursor and cursor.get("v") == CURSOR_VERSION else None
    files = [only] if only else history_files([folder])
    cursors: dict[str, Any] = dict(known) if isinstance(known, dict) else {}
    sessions = []
    for path in files:
        if not path.is_file():
            continue
        previous = cursors.get(path.name)
        session, cursors[path.name] = read_file(path, previous if isinstance(previous, dict) else None, final=False)
        if session is not None and session.messages:
            sessions.append(session)
    return sessions, {"v": CURSOR_VERSION, "files": cursors}
