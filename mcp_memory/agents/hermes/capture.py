"""Capture of HermesAgent sessions: what is new in `state.db` since the last run, by message row id.

Hermes writes every message as one INSERT into table `messages` (`id INTEGER PRIMARY KEY
AUTOINCREMENT`, one writer at a time: SQLite serialises them), so row ids only grow and a row, once
written, keeps its id: a cursor holding the last id read is exact. Both the shell hook that `install`
registers (`on_session_end` → `mcp-memory sync hermes --hook`) and `mcp-memory watch hermes` use it.
A run reads at most MAX_ROWS rows, so a first capture of a large store cannot outlast the hook's
timeout; the next run continues from there. README.md in this package, §Capture.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base import FormatError, NeutralSession
from .adapter import open_db, session_from_record, session_record, system_prompts

MAX_ROWS = 2000
CURSOR_VERSION = 1


def state_db(environ: Mapping[str, str]) -> Path:
    """`$HERMES_HOME/state.db` (Hermes runs shell hooks with the profile's HERMES_HOME), else
    `~/.hermes/state.db`."""
    if environ.get("HERMES_HOME"):
        return Path(environ["HERMES_HOME"]) / "state.db"
    if not environ.get("HOME"):
        raise FormatError("neither HERMES_HOME nor HOME is set; say which state.db to sync: --path FILE")
    return Path(environ["HOME"]) / ".hermes" / "state.db"


def read_new(
    path: Path, cursor: dict[str, Any] | None, *, session: str | None = None, limit: int = MAX_ROWS
) -> tuple[list[NeutralSession], dict[str, Any]]:
    """The sessions with message rows after the cursor's row id (only those rows), and the new cursor."""
    after = _after(cursor)
    try:
        connection = open_db(path)
    except sqlite3.Error as exc:
        raise FormatError(f"{path}: cannot open Hermes' state.db ({exc})") from None
    try:
        rows = _new_rows(connection, after, session, limit)
        prompts = system_prompts(connection) if rows else {}
        sessions = []
        for session_id, messages in _by_session(rows).items():
            head = connection.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if head is None:  # a message row of a deleted session: nothing to attach it to
                continue
            sessions.append(session_from_record(session_record(head, messages, prompts), source_path=path))
    except sqlite3.Error as exc:
        raise FormatError(f"{path} is not a Hermes state.db this version understands ({exc})") from None
    finally:
        connection.close()
    last = max((int(row["id"]) for row in rows), default=after)
    return sessions, {"v": CURSOR_VERSION, "after": last}


def _after(cursor: dict[str, Any] | None) -> int:
    """The last row id read; a cursor of another version (or a crafted one) starts from the beginning."""
    if not cursor or cursor.get("v") != CURSOR_VERSION:
        return 0
    after = cursor.get("after")
    return after if isinstance(after, int) and not isinstance(after, bool) and after >= 0 else 0


def _new_rows(connection: sqlite3.Connection, after: int, session: str | None, limit: int) -> list[sqlite3.Row]:
    if session is None:
        return connection.execute("SELECT * FROM messages WHERE id > ? ORDER BY id LIMIT ?",
                                  (after, limit)).fetchall()
    return connection.execute("SELECT * FROM messages WHERE id > ? AND session_id = ? ORDER BY id LIMIT ?",
                              (after, session, limit)).fetchall()


def _by_session(rows: list[sqlite3.Row]) -> dict[str, list[sqlite3.Row]]:
    grouped: dict[str, list[sqlite3.Row]] = {}
    for row in rows:
        grouped.setdefault(str(row["session_id"]), []).append(row)
    return grouped
