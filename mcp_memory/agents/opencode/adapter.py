"""OpenCode (sst/opencode, npm `opencode-ai`) 1.x sessions ⇄ neutral sessions.

Format facts are in README.md in this package (from the OpenCode sources and the `@opencode-ai/sdk`
1.19.3 types); they were checked against files written by OpenCode 1.18.33 itself
(`tests/fixtures/real/opencode/`) and by importing our output into that version.

Reads all three 1.x generations — `opencode.db` (1.2.0+), the legacy `storage/` JSON tree and
`opencode export` JSON — deduplicating by session id (the newest copy wins, the database on a tie).
Writes the `opencode import` JSON; `install` runs `opencode import` in the target project. Capture
reads the database incrementally (`read_incremental`, `read_session_from_db`). The layout readers
live in storage.py, the conversions in read.py / write.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ...schema import format_time
from ...shell import command_line
from ..base import Adapter, FormatError, MappingReport, NeutralSession, WriteOptions, WrittenSession
from . import DISPLAY_NAME, NAME
from . import storage as native_io
from .read import AGENT, convert_message, is_settled, ms_to_datetime, obj
from .storage import spawning_call_of
from .write import render

IMPORTED = re.compile(r"Imported session:\s*(ses_[0-9A-Za-z]+)")
SOURCE_RANK = {"db": 2, "export": 1, "storage": 0}  # which copy wins a tie on time.updated


def default_db_path(environ: Mapping[str, str]) -> Path:
    """`$XDG_DATA_HOME/opencode/opencode.db`, else `~/.local/share/opencode/opencode.db`."""
    data = environ.get("XDG_DATA_HOME")
    if data:
        return Path(data) / "opencode" / "opencode.db"
    home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    return home / ".local" / "share" / "opencode" / "opencode.db"


class OpenCodeAdapter(Adapter):
    name = NAME
    display_name = DISPLAY_NAME

    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        found: dict[str, tuple[tuple[int, int], native_io.NativeSession, Path]] = {}
        for path in paths:
            for kind, native, source in _load(Path(path)):
                session_id = str(native["info"].get("id") or "")
                rank = (_updated(native), SOURCE_RANK[kind])
                if session_id and (session_id not in found or rank > found[session_id][0]):
                    found[session_id] = (rank, native, source)
        sessions = [to_neutral(native, source) for _, native, source in found.values()]
        link_children(sessions)
        return sessions

    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        report = MappingReport(agent=self.name, direction="write")
        document = render(session, options, report)
        session_id = document["info"]["id"]
        target = out_dir / f"{session_id}.json"
        atomic_write(target, json.dumps(document, ensure_ascii=False, indent=2) + "\n", within=out_dir)
        cwd = str(options.cwd or session.meta.get("cwd") or ".")
        command = (command_line(["opencode", "import", str(target)], cwd=cwd) + " && "
                   + command_line(["opencode", "--session", session_id]))
        return WrittenSession(session_id, [target], report, command)

    def read_incremental(
        self, path: Path, cursor: dict[str, Any] | None
    ) -> tuple[list[NeutralSession], dict[str, Any]]:
        if not native_io.is_sqlite(path):
            return self.read([path]), {}
        return read_db_incremental(path, None, cursor)

    def install_dir(self, cwd: Path, env: Mapping[str, str]) -> Path:
        """OpenCode keeps sessions in its database; import files wait here for `opencode import`."""
        return default_db_path(env).parent / "mcp-memory-import"

    def install(
        self, session: NeutralSession, *, cwd: Path, env: Mapping[str, str], options: WriteOptions
    ) -> WrittenSession:
        from .install import configured_model

        extra = dict(options.extra)
        if "opencode_model" not in extra:  # resume with the model this user's OpenCode is set up for
            model = configured_model(Path(cwd), env)
            if model:
                extra["opencode_model"] = model
        options = WriteOptions(thinking=options.thinking, cwd=options.cwd or cwd, extra=extra)
        written = self.write(session, self.install_dir(cwd, env), options)
        binary = shutil.which("opencode", path=env.get("PATH"))
        if binary is None:
            written.report.note("opencode is not on PATH: run resume_command to import the session")
            return written
        result = subprocess.run(
            [binary, "import", str(written.files[0])],
            cwd=cwd,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        match = IMPORTED.search(result.stdout + result.stderr)
        if result.returncode != 0 or match is None:
            output = (result.stderr or result.stdout).strip()[-500:]
            raise RuntimeError(f"opencode import failed (exit {result.returncode}): {output}")
        session_id = match.group(1)
        written.native_id = session_id
        written.resume_command = command_line(["opencode", "--session", session_id], cwd=str(cwd))
        return written


# --- reading ---------------------------------------------------------------------------------------


def _load(path: Path, depth: int = 3) -> list[tuple[str, native_io.NativeSession, Path]]:
    """Sessions under a path: a database, an export, a storage tree, or a folder holding them
    (searched a few levels down, so a data dir, a backup folder or a fixture tree all work)."""
    if path.is_file():
        if native_io.is_sqlite(path):
            return [("db", s, path) for s in native_io.load_db(path)]
        return [("export", native_io.load_export(path), path)]
    if not path.is_dir():
        raise FormatError(f"{path}: no such file or folder")
    if native_io.is_storage_dir(path):
        return [("storage", s, path) for s in native_io.load_storage(path)]
    loaded: list[tuple[str, native_io.NativeSession, Path]] = []
    for db in sorted(path.glob("*.db")):
        if native_io.is_sqlite(db):
            loaded.extend(("db", s, db) for s in native_io.load_db(db))
    if native_io.is_storage_dir(path / "storage"):
        loaded.extend(("storage", s, path / "storage") for s in native_io.load_storage(path / "storage"))
    for export in sorted(path.glob("*.json")):
        loaded.extend(_maybe_export(export))
    if depth > 0:
        for sub in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if sub.name not in ("storage", "node_modules", "snapshot", "log"):
                loaded.extend(_load(sub, depth - 1))
    return loaded


def _maybe_export(path: Path) -> list[tuple[str, native_io.NativeSession, Path]]:
    """A `.json` beside other files is read when it looks like an export (2.x ones still raise)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or "info" not in data or "messages" not in data:
        return []
    native_io.check_export(data, path)
    return [("export", data, path)]


def _updated(native: native_io.NativeSession) -> int:
    time = native["info"].get("time")
    return int(time.get("updated") or 0) if isinstance(time, dict) else 0


def to_neutral(native: native_io.NativeSession, source: Path | None) -> NeutralSession:
    info = native["info"]
    report = MappingReport(agent=AGENT, direction="read")
    messages = []
    for message in native.get("messages") or []:
        if isinstance(message, dict):
            messages.extend(convert_message(message, report))
    return NeutralSession(
        agent=AGENT,
        native_id=str(info["id"]),
        messages=messages,
        meta=session_meta(native, messages),
        report=report,
        parent_native_id=info.get("parentID"),
        source_path=source,
    )


def session_meta(native: native_io.NativeSession, messages: list[Any]) -> dict[str, Any]:
    info = native["info"]
    time = obj(info.get("time"))
    meta: dict[str, Any] = {"agent_source": AGENT, "native": {"info": info}}
    if native.get("todos"):
        meta["native"]["todos"] = native["todos"]
    if info.get("title"):
        meta["title"] = info["title"]
    if info.get("directory"):
        meta["cwd"] = info["directory"]
    model = (info.get("model") or {}).get("id") if isinstance(info.get("model"), dict) else None
    model = model or next((m.metadata["model"] for m in messages if m.metadata.get("model")), None)
    if model:
        meta["model"] = model
    for key in ("created", "updated"):
        moment = ms_to_datetime(time.get(key))
        if moment is not None:
            meta[f"{key}_at"] = format_time(moment)
    if info.get("version"):
        meta["version"] = info["version"]
    return meta


def link_children(sessions: list[NeutralSession]) -> None:
    """Child sessions (task tool) point at the parent's tool call that spawned them."""
    by_id = {s.native_id: s for s in sessions}
    for child in sessions:
        parent = by_id.get(child.parent_native_id or "")
        if parent is None or child.parent_tool_call_id:
            continue
        for message in parent.messages:
            part = (message.metadata.get("native") or {}).get("part")
            if message.role == "tool" and isinstance(part, dict) and spawning_call_of(part, child.native_id):
                child.parent_tool_call_id = message.tool_call_id
                break


# --- incremental capture ---------------------------------------------------------------------------


def read_session_from_db(
    db_path: Path, session_id: str, cursor: dict[str, Any] | None
) -> tuple[list[NeutralSession], dict[str, Any]]:
    """What is new in one session (and its child sessions) since `cursor`; used by
    `mcp-memory sync opencode --session <id>`. The cursor is the same dict `read_incremental` uses."""
    return read_db_incremental(db_path, session_id, cursor)


def read_db_incremental(
    db_path: Path, session_id: str | None, cursor: dict[str, Any] | None
) -> tuple[list[NeutralSession], dict[str, Any]]:
    """Cursor: `{"sessions": {ses_id: {"updated": ms, "after": [time_created, msg_id]}}}`. Only settled
    messages (user messages with parts, finished assistant messages) move the watermark, so a turn
    still streaming is read, complete, on a later call."""
    marks: dict[str, Any] = dict((cursor or {}).get("sessions") or {})
    sessions = []
    with native_io.open_db(db_path) as connection:
        for row in _rows_to_scan(connection, session_id):
            mark = marks.get(row["id"]) or {}
            activity = native_io.db_last_activity(connection, row)
            if mark and activity <= mark.get("updated", -1):
                continue
            after = _watermark(mark.get("after"))
            messages = native_io.db_messages(connection, row["id"], after)
            settled = _settled_prefix(messages)
            new_mark = {
                "updated": activity if len(settled) == len(messages) else mark.get("updated", 0),
                "after": [settled[-1]["time_created"], settled[-1]["info"]["id"]] if settled else after,
            }
            marks[row["id"]] = new_mark
            if settled:
                sessions.append(_incremental_session(connection, row, settled, db_path))
    return sessions, {"version": 1, "sessions": marks}


def _incremental_session(
    connection: Any, row: Any, messages: list[dict[str, Any]], db_path: Path
) -> NeutralSession:
    native = native_io.db_native_session(connection, row, messages)
    session = to_neutral(native, db_path)
    if session.parent_native_id:
        session.parent_tool_call_id = native_io.db_spawning_call(
            connection, session.parent_native_id, session.native_id
        )
    return session


def _rows_to_scan(connection: Any, session_id: str | None) -> list[Any]:
    if session_id is None:
        return native_io.db_session_rows(connection)
    rows = native_io.db_session_rows(connection, session_id)
    for child_id in native_io.db_child_ids(connection, session_id):
        rows.extend(native_io.db_session_rows(connection, child_id))
    return rows


def _watermark(value: Any) -> tuple[int, str] | None:
    """A cursor's `[time_created, message id]`; anything else (an old or damaged cursor) reads all."""
    if isinstance(value, list | tuple) and len(value) == 2 and isinstance(value[0], int) \
            and isinstance(value[1], str):
        return value[0], value[1]
    return None


def _settled_prefix(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages up to the first unfinished one; a message followed by others counts as finished."""
    settled = []
    for index, message in enumerate(messages):
        if index == len(messages) - 1 and not is_settled(message):
            break
        settled.append(message)
    return settled
