"""Loading OpenCode 1.x sessions from disk into the `opencode export` shape.

Every storage generation is normalised to what `opencode export <id>` prints:
`{"info": Session, "messages": [{"info": Message, "parts": [Part, …]}]}` (plus `todos` when known).

Format facts (README.md in this package, §Storage, checked against the files written by
OpenCode 1.18.33 in `tests/fixtures/real/opencode/`):
- `opencode.db` (1.2.0 and later): tables `session`, `message(data)`, `part(data)`, `todo`; `data`
  is the record without its id columns; read back as `{...data, id, sessionID[, messageID]}`.
  Messages are ordered by `(time_created, id)`, parts by `id`. Opened read-only through a
  `file:…?mode=ro` URI; columns are selected by name so extra tables and columns do not matter.
- legacy `storage/` JSON tree (0.x–1.1.x): `session/<project>/<ses>.json`,
  `message/<ses>/<msg>.json`, `part/<msg>/<prt>.json`, `todo/<ses>.json`; ids come from the paths.
- OpenCode 2.x exports (`info.location`, typed `messages[].type`) are refused with a ValueError.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..base import FormatError
from .read import obj

NativeSession = dict[str, Any]  # {"info": …, "messages": [{"info": …, "parts": […]}], "todos"?: […]}

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def is_storage_dir(path: Path) -> bool:
    return (path / "session").is_dir() and (path / "message").is_dir()


# --- opencode export JSON -------------------------------------------------------------------------


def load_export(path: Path) -> NativeSession:
    data = json.loads(path.read_text(encoding="utf-8"))
    check_export(data, path)
    return data


def check_export(data: Any, path: Path) -> None:
    """ValueError (the adapters' "this is not a file I can read") for anything but a 1.x export."""
    if not isinstance(data, dict) or not isinstance(data.get("info"), dict):
        raise FormatError(f"{path}: not an `opencode export` file (no top-level 'info' object)")  # noqa: TRY004
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise FormatError(f"{path}: not an `opencode export` file (no 'messages' list)")  # noqa: TRY004
    typed = any(isinstance(m, dict) and "type" in m and "info" not in m for m in messages)
    if "location" in data["info"] or typed:
        raise FormatError(
            f"{path}: this is an OpenCode 2.x export (session 'location' / typed messages); "
            "only OpenCode 1.x exports are supported yet — export it with OpenCode 1.x"
        )


# --- legacy storage/ JSON tree ---------------------------------------------------------------------


def load_storage(storage: Path) -> list[NativeSession]:
    sessions = []
    for session_file in sorted((storage / "session").glob("*/*.json")):
        info = _read_json(session_file)
        if not isinstance(info, dict):
            continue
        session_id = session_file.stem
        info = {**info, "id": session_id}
        native: NativeSession = {"info": info, "messages": _storage_messages(storage, session_id)}
        todos = _read_json(storage / "todo" / f"{session_id}.json")
        if isinstance(todos, list):
            native["todos"] = todos
        sessions.append(native)
    return sessions


def _storage_messages(storage: Path, session_id: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for message_file in (storage / "message" / session_id).glob("*.json"):
        info = _read_json(message_file)
        if not isinstance(info, dict):
            continue
        message_id = message_file.stem
        info = {**info, "id": message_id, "sessionID": session_id}
        parts = []
        for part_file in sorted((storage / "part" / message_id).glob("*.json")):
            part = _read_json(part_file)
            if isinstance(part, dict):
                parts.append({**part, "id": part_file.stem, "sessionID": session_id, "messageID": message_id})
        messages.append({"info": info, "parts": parts})
    messages.sort(key=lambda m: (_created(m["info"]), m["info"]["id"]))
    return messages


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _created(info: dict[str, Any]) -> int:
    time = info.get("time")
    return int(time.get("created") or 0) if isinstance(time, dict) else 0


# --- opencode.db (SQLite) ---------------------------------------------------------------------------


@contextmanager
def open_db(path: Path) -> Iterator[sqlite3.Connection]:
    """Read-only connection; WAL-safe (never checkpoints or creates files beside a read-only DB)."""
    uri = path.resolve().as_uri()
    try:
        connection = sqlite3.connect(f"{uri}?mode=ro", uri=True)
        connection.execute("SELECT 1 FROM sqlite_master LIMIT 1")
    except sqlite3.OperationalError:  # read-only folder without -shm: read the file as it stands
        connection = sqlite3.connect(f"{uri}?immutable=1", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        yield connection
    finally:
        connection.close()


def table_columns(connection: sqlite3.Connection, table: str) -> set[str]:
    return {row["name"] for row in connection.execute(f"PRAGMA table_info({_quote(table)})")}


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def db_session_rows(connection: sqlite3.Connection, session_id: str | None = None) -> list[sqlite3.Row]:
    if session_id is None:
        return list(connection.execute("SELECT * FROM session ORDER BY time_created, id"))
    return list(connection.execute("SELECT * FROM session WHERE id = ?", (session_id,)))


def db_child_ids(connection: sqlite3.Connection, session_id: str) -> list[str]:
    rows = connection.execute(
        "SELECT id FROM session WHERE parent_id = ? ORDER BY time_created, id", (session_id,)
    )
    return [row["id"] for row in rows]


def session_info_from_row(row: sqlite3.Row) -> dict[str, Any]:
    """A `session` row back into the Session.Info shape that `opencode export` prints."""
    col = _Columns(row)
    info: dict[str, Any] = {"id": row["id"]}
    for key, column in (("slug", "slug"), ("projectID", "project_id"), ("workspaceID", "workspace_id")):
        col.put(info, key, column)
    for key in ("directory", "path"):
        col.put(info, key, key)
    col.put(info, "parentID", "parent_id")
    summary = {k: col.get(f"summary_{k}") for k in ("additions", "deletions", "files")}
    if col.get("summary_diffs") is not None:
        summary["diffs"] = col.json("summary_diffs")
    if any(value is not None for value in summary.values()):
        info["summary"] = summary
    if col.get("share_url"):
        info["share"] = {"url": col.get("share_url")}
    for key in ("title", "agent"):
        col.put(info, key, key)
    for key in ("model", "metadata"):
        if col.get(key) is not None:
            info[key] = col.json(key)
    col.put(info, "version", "version")
    info["cost"] = col.get("cost") or 0
    info["tokens"] = {
        "input": col.get("tokens_input") or 0,
        "output": col.get("tokens_output") or 0,
        "reasoning": col.get("tokens_reasoning") or 0,
        "cache": {"read": col.get("tokens_cache_read") or 0, "write": col.get("tokens_cache_write") or 0},
    }
    for key in ("permission", "revert"):
        if col.get(key) is not None:
            info[key] = col.json(key)
    time = {"created": col.get("time_created"), "updated": col.get("time_updated")}
    for key in ("compacting", "archived"):
        if col.get(f"time_{key}") is not None:
            time[key] = col.get(f"time_{key}")
    info["time"] = time
    return info


class _Columns:
    """Column access by name that tolerates columns a given OpenCode version does not have."""

    def __init__(self, row: sqlite3.Row) -> None:
        self.row = row
        self.names = set(row.keys())

    def get(self, name: str) -> Any:
        return self.row[name] if name in self.names else None

    def json(self, name: str) -> Any:
        value = self.get(name)
        try:
            return json.loads(value) if isinstance(value, str) else value
        except ValueError:
            return value

    def put(self, info: dict[str, Any], key: str, column: str) -> None:
        value = self.get(column)
        if value is not None:
            info[key] = value


def db_messages(
    connection: sqlite3.Connection, session_id: str, after: tuple[int, str] | None = None
) -> list[dict[str, Any]]:
    """Messages of one session (optionally only those after a `(time_created, id)` watermark)."""
    query = "SELECT id, time_created, data FROM message WHERE session_id = ?"
    params: tuple[Any, ...] = (session_id,)
    if after is not None:
        query += " AND (time_created > ? OR (time_created = ? AND id > ?))"
        params += (after[0], after[0], after[1])
    rows = list(connection.execute(query + " ORDER BY time_created, id", params))
    parts = _db_parts(connection, session_id, [row["id"] for row in rows])
    messages = []
    for row in rows:
        info = {**_json_object(row["data"]), "id": row["id"], "sessionID": session_id}
        messages.append(
            {"info": info, "parts": parts.get(row["id"], []), "time_created": row["time_created"]}
        )
    return messages


def _db_parts(
    connection: sqlite3.Connection, session_id: str, message_ids: list[str]
) -> dict[str, list[Any]]:
    wanted = set(message_ids)
    parts: dict[str, list[Any]] = {}
    if not wanted:
        return parts
    rows = connection.execute(
        "SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY message_id, id", (session_id,)
    )
    for row in rows:
        if row["message_id"] in wanted:
            part = {**_json_object(row["data"]), "id": row["id"], "sessionID": session_id}
            parts.setdefault(row["message_id"], []).append({**part, "messageID": row["message_id"]})
    return parts


def db_todos(connection: sqlite3.Connection, session_id: str) -> list[dict[str, Any]] | None:
    if "position" not in table_columns(connection, "todo"):
        return None
    rows = connection.execute("SELECT * FROM todo WHERE session_id = ? ORDER BY position", (session_id,))
    todos = [{k: row[k] for k in ("content", "status", "priority") if k in row} for row in rows]
    return todos or None


def db_spawning_call(connection: sqlite3.Connection, parent_id: str, child_id: str) -> str | None:
    """The callID of the `task` tool part in the parent session that created child session `child_id`."""
    rows = connection.execute(
        "SELECT data FROM part WHERE session_id = ? AND instr(data, ?) > 0 ORDER BY id", (parent_id, child_id)
    )
    for row in rows:
        call_id = spawning_call_of(_json_object(row["data"]), child_id)
        if call_id:
            return call_id
    return None


def spawning_call_of(part: dict[str, Any], child_id: str) -> str | None:
    if part.get("type") != "tool":
        return None
    state = obj(part.get("state"))
    metadata = obj(state.get("metadata"))
    if metadata.get("sessionId") == child_id or f'<task id="{child_id}"' in str(state.get("output", "")):
        return part.get("callID")
    return None


def load_db(path: Path) -> list[NativeSession]:
    with open_db(path) as connection:
        return [db_native_session(connection, row) for row in db_session_rows(connection)]


def db_native_session(
    connection: sqlite3.Connection, row: sqlite3.Row, messages: list[dict[str, Any]] | None = None
) -> NativeSession:
    """One session in export shape; `messages` (from `db_messages`) limits it to those messages."""
    if messages is None:
        messages = db_messages(connection, row["id"])
    native: NativeSession = {
        "info": session_info_from_row(row),
        "messages": [{"info": m["info"], "parts": m["parts"]} for m in messages],
    }
    todos = db_todos(connection, row["id"])
    if todos:
        native["todos"] = todos
    return native


def db_last_activity(connection: sqlite3.Connection, row: sqlite3.Row) -> int:
    """The latest `time_updated` of the session, its messages and its parts."""
    latest = [row["time_updated"] or 0]
    for table in ("message", "part"):
        value = connection.execute(
            f"SELECT max(time_updated) FROM {table} WHERE session_id = ?", (row["id"],)
        ).fetchone()[0]
        latest.append(value or 0)
    return max(latest)


def _json_object(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, (str, bytes)) else None
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {}
