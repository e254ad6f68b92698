"""Reading only what is new in a rollout, for capture (`mcp-memory sync codex --hook`).

A rollout only grows: Codex appends one JSON line per record. The cursor keeps the byte offset and
line number reached, the facts of the lines before it (session id, session meta without the long
base instructions, model, cwd, last time) and the item-id counts that make append_ids, so a read
starts where the last one stopped and gives every message the append_id a full read would. Lines
after the last message belong to the next message (`native_before`): the cursor stops before them
and the next read takes them again. A last line without its newline is still being written and is
left for the next read too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...schema import NeutralSession
from ..base import MappingReport, parse_time
from .read import AGENT, RolloutState, parse_rollout

CURSOR_VERSION = 1
META_KEYS = ("id", "session_id", "timestamp", "cwd", "originator", "cli_version", "source", "model_provider",
             "forked_from_id", "git")  # what session_meta() reads from the raw meta


def fresh_cursor() -> dict[str, Any]:
    return {"v": CURSOR_VERSION, "offset": 0, "line": 0, "state": None}


def _usable(cursor: Any, size: int) -> bool:
    """A cursor of this version whose offset and line number are numbers within the file."""
    if not isinstance(cursor, dict) or cursor.get("v") != CURSOR_VERSION:
        return False
    offset, line = cursor.get("offset"), cursor.get("line")
    return (isinstance(offset, int) and isinstance(line, int) and not isinstance(offset, bool)
            and 0 <= offset <= size and line >= 0)


def read_new_lines(path: Path, offset: int) -> tuple[list[tuple[int, Any]], int]:
    """(byte offset of each complete line after `offset`, decoded line or None), and the offset
    just past the last complete line."""
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read()
    end = data.rfind(b"\n") + 1
    found: list[tuple[int, Any]] = []
    position = 0
    while position < end:
        newline = data.index(b"\n", position)
        raw = data[position:newline]
        if raw.strip():
            try:
                found.append((offset + position, json.loads(raw.decode("utf-8", errors="replace"))))
            except ValueError:
                found.append((offset + position, None))
        position = newline + 1
    return found, offset + end


def restore(saved: Any, report: MappingReport, fallback_id: str) -> RolloutState:
    state = RolloutState(report=report, session_id=fallback_id)
    if not isinstance(saved, dict):
        return state
    state.session_id = str(saved.get("session_id") or fallback_id)
    meta = saved.get("meta")
    state.meta = meta if isinstance(meta, dict) else {}
    state.legacy = bool(saved.get("legacy"))
    state.model = saved.get("model") if isinstance(saved.get("model"), str) else None
    state.cwd = saved.get("cwd") if isinstance(saved.get("cwd"), str) else None
    state.last_time = parse_time(saved.get("last_time"))
    keys = saved.get("seen_keys")
    state.seen_keys = {str(k): int(v) for k, v in keys.items() if isinstance(v, int)} if isinstance(keys, dict) else {}
    return state


def persist(state: RolloutState) -> dict[str, Any]:
    return {
        "session_id": state.session_id,
        "meta": {key: state.meta[key] for key in META_KEYS if key in state.meta},
        "legacy": state.legacy, "model": state.model, "cwd": state.cwd,
        "last_time": state.last_time.isoformat() if state.last_time else None,
        "seen_keys": state.seen_keys,
    }


def read_incremental(
    path: Path, cursor: dict[str, Any] | None, fallback_id: str
) -> tuple[RolloutState, dict[str, Any]]:
    """The state holding only the messages after `cursor` (None: from the start), and the next cursor."""
    if not _usable(cursor, path.stat().st_size):
        cursor = fresh_cursor()  # first read, another version, or a file that was replaced by a shorter one
    assert cursor is not None
    report = MappingReport(agent=AGENT, direction="read")
    state = restore(cursor.get("state"), report, fallback_id)
    found, end = read_new_lines(path, int(cursor["offset"]))
    first_line = int(cursor["line"])
    decoded = []
    for _, line in found:
        if line is None:
            report.drop("undecodable JSON line")
            decoded.append("undecodable")  # keeps line numbers; parse_rollout drops non-objects
        else:
            decoded.append(line)
    parse_rollout(decoded, report, fallback_id, state=state, start=first_line)
    next_offset, next_line = end, first_line + len(found)
    if state.pending:  # lines after the last message: read again with the message they precede
        next_line = state.pending_from
        next_offset = found[next_line - first_line][0]
    return state, {"v": CURSOR_VERSION, "offset": next_offset, "line": next_line, "state": persist(state)}


def without_trailing(session: NeutralSession) -> NeutralSession:
    """The lines after the last message are read again next time: not part of this read's meta."""
    native = session.meta.get("native")
    if isinstance(native, dict):
        native.pop("trailing", None)
    return session
