"""HermesAgent (NousResearch/hermes-agent): `~/.hermes/state.db` and `hermes sessions export` JSONL.

Format facts (README.md in this package, from hermes-agent at the commits named below):
- `state.db` is SQLite (schema version 30 when studied; columns are added often, so rows are read by
  column name via `SELECT *`). Table `sessions` (id, source, model, title, cwd, started_at …) and
  `messages` (OpenAI-shaped: role, content, tool_calls JSON, tool_call_id, tool_name, timestamp,
  reasoning columns, active/compacted …), ordered by `id`. Structured content is stored as the
  string "\\x00json:" + JSON (`_CONTENT_JSON_PREFIX`). [hermes_state_common.py@00704d08,
  hermes_state_messages.py@01e8a2d0]
- The export format (`SessionDB.export_session` / `export_all`, one JSON object per line) is a
  `sessions` row plus `"messages"`: raw message rows with content decoded and tool_calls parsed.
  It is also what `SessionDB.import_sessions` takes back. [hermes_state_portability.py@03106cd8]
- Reasoning: `reasoning` is the normalized text (→ neutral thinking); `reasoning_content`,
  `reasoning_details` and `codex_reasoning_items` are provider echoes, kept in the native row.

The database is opened read-only (`mode=ro`). Writing produces the export JSONL, never rows in a
live state.db (triggers, leases and WAL make direct writes unsafe).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...files import atomic_write, safe_name
from ...schema import MessageIn, format_time
from ..base import Adapter, FormatError, MappingReport, NeutralSession, WriteOptions, WrittenSession, stable_id
from ..openai_chat.adapter import message_from_openai, report_unwritten
from . import DISPLAY_NAME, NAME

CONTENT_JSON_PREFIX = "\x00json:"
JSON_COLUMNS = (
    "tool_calls",
    "reasoning_details",
    "codex_reasoning_items",
    "codex_message_items",
    "display_metadata",
)
MAPPED_MESSAGE_COLUMNS = {
    "id",
    "session_id",
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "timestamp",
    "reasoning",
    "reasoning_content",
    "active",
    "compacted",
    "message_uid",
}
MAPPED_SESSION_COLUMNS = {
    "id",
    "source",
    "model",
    "title",
    "cwd",
    "started_at",
    "parent_session_id",
    "system_prompt",
    "messages",
}
DEFAULT_ROW_VALUES: tuple[Any, ...] = (None, 0, "", [], {})
RESUME_NOTE = (
    "load the file with Hermes' SessionDB.import_sessions (the export/import format; whether "
    "`hermes sessions import FILE` restores it is unconfirmed), then `hermes --resume <id>`. A resumed "
    "Hermes session carries roles, text and content parts, tool calls with their results, reasoning "
    "text and timestamps; it cannot carry thinking signatures or encrypted thinking of other "
    "providers, per-message metadata, or a foreign system prompt as a message (Hermes rebuilds its "
    "own system prompt; the original is kept in the session's system_prompt column)"
)


class HermesAdapter(Adapter):
    name = NAME
    display_name = DISPLAY_NAME

    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        sessions: list[NeutralSession] = []
        for path in _native_files(paths):
            records = _read_db(path) if path.suffix in (".db", ".sqlite") else _read_export(path)
            # a line without a session id is not a Hermes export record (another agent's file)
            sessions.extend(session_from_record(record, source_path=path) for record in records
                            if isinstance(record, dict) and record.get("id") is not None)
        return sessions

    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        report = MappingReport(agent=NAME, direction="write")
        record = record_from_session(session, options=options, report=report)
        if not safe_name(str(record.get("id"))):  # meta is data: a crafted id names no file
            raise FormatError(f"Hermes session id {str(record.get('id'))[:80]!r} is not a plain name "
                              "(letters, digits, '.', '_', '-')")
        target = out_dir / f"{record['id']}.jsonl"
        atomic_write(target, json.dumps(record, ensure_ascii=False) + "\n", within=out_dir)
        report.note(RESUME_NOTE)
        return WrittenSession(native_id=record["id"], files=[target], report=report)


# --- reading -------------------------------------------------------------------------------------


def _native_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        files.extend(sorted(path.glob("state.db")))
        files.extend(sorted(path.glob("profiles/*/state.db")))
        files.extend(sorted(path.glob("*.jsonl")))
    return files


def _read_export(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        document = json.loads(text)
        return document if isinstance(document, list) else [document]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _read_db(path: Path) -> list[dict[str, Any]]:
    connection = open_db(path)
    try:
        prompts = system_prompts(connection)
        records = []
        for row in connection.execute("SELECT * FROM sessions ORDER BY started_at, id"):
            rows = connection.execute("SELECT * FROM messages WHERE session_id = ? ORDER BY id", (row["id"],))
            records.append(session_record(row, rows, prompts))
        return records
    finally:
        connection.close()


def open_db(path: Path) -> sqlite3.Connection:
    """state.db, read-only (Hermes owns it: WAL, triggers, leases), rows addressable by column name."""
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    return connection


def session_record(
    session: sqlite3.Row, messages: Iterable[sqlite3.Row], prompts: dict[str, str]
) -> dict[str, Any]:
    """A `sessions` row and its message rows in the export's shape (what `session_from_record` reads)."""
    record = dict(session)
    if not record.get("system_prompt") and record.get("system_prompt_hash") in prompts:
        record["system_prompt"] = prompts[record["system_prompt_hash"]]
    record["messages"] = [_decode_row(dict(message)) for message in messages]
    return record


def system_prompts(connection: sqlite3.Connection) -> dict[str, str]:
    """hash → prompt of table `system_prompts` (newer schemas), empty when the table is absent."""
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "system_prompts" not in tables:
        return {}
    return {
        row["hash"]: row["prompt"] for row in connection.execute("SELECT hash, prompt FROM system_prompts")
    }


def _decode_row(row: dict[str, Any]) -> dict[str, Any]:
    """A stored message row in the export's shape: content decoded, JSON columns parsed."""
    content = row.get("content")
    if isinstance(content, str) and content.startswith(CONTENT_JSON_PREFIX):
        row["content"] = json.loads(content[len(CONTENT_JSON_PREFIX) :])
    for column in JSON_COLUMNS:
        if isinstance(row.get(column), str):
            try:
                row[column] = json.loads(row[column])
            except ValueError:
                pass
    for column, value in row.items():
        if isinstance(value, bytes):  # BLOB columns (display_identity): hex keeps them JSON-able
            row[column] = value.hex()
    return row


def session_from_record(record: dict[str, Any], *, source_path: Path | None = None) -> NeutralSession:
    """One export record (a `sessions` row plus its message rows) → neutral session."""
    report = MappingReport(agent=NAME, direction="read")
    session_id = str(record["id"])
    model = record.get("model")
    messages: list[MessageIn] = []
    inactive: list[dict[str, Any]] = []
    for row in record.get("messages") or []:
        if row.get("active", 1) in (0, False):
            inactive.append(row)
            continue
        message = _message_from_row(row, session_id=session_id, model=model, report=report)
        if message is not None:
            messages.append(message)
    if inactive:
        report.transform(
            "inactive (compacted) message rows (kept under meta.native, not in the transcript)", len(inactive)
        )
    _count_unmapped(record, MAPPED_SESSION_COLUMNS, "session column", report)
    native = {key: value for key, value in record.items() if key != "messages"}
    native["inactive_messages"] = inactive
    meta = {
        "agent_source": NAME,
        "title": record.get("title"),
        "cwd": record.get("cwd"),
        "model": model,
        "created_at": _rfc3339(record.get("started_at")),
        "system_prompt": record.get("system_prompt"),
        "native": native,
    }
    return NeutralSession(
        agent=NAME,
        native_id=session_id,
        messages=messages,
        meta={key: value for key, value in meta.items() if value is not None},
        report=report,
        parent_native_id=record.get("parent_session_id"),
        source_path=source_path,
    )


def _message_from_row(
    row: dict[str, Any], *, session_id: str, model: str | None, report: MappingReport
) -> MessageIn | None:
    native_key = row.get("message_uid") or row.get("id")
    role = row.get("role")
    openai_shaped = {
        "role": role,
        "content": row.get("content"),
        "tool_calls": row.get("tool_calls"),
        "tool_call_id": row.get("tool_call_id"),
        "name": row.get("tool_name") if role == "tool" else None,
        "reasoning_content": (row.get("reasoning") or row.get("reasoning_content"))
        if role == "assistant"
        else None,
    }
    message = message_from_openai(
        {key: value for key, value in openai_shaped.items() if value is not None},
        append_id=stable_id(NAME, session_id, native_key, prefix="hm_"),
        report=report,
    )
    if message is None:
        return None
    message.created_at = _datetime(row.get("timestamp"))
    message.metadata = {"agent_source": NAME, "native": row}
    if model and message.role == "assistant":
        message.metadata["model"] = model
    _count_unmapped(row, MAPPED_MESSAGE_COLUMNS, "message column", report)
    return message


def _count_unmapped(row: dict[str, Any], mapped: set[str], label: str, report: MappingReport) -> None:
    for column, value in row.items():
        if column not in mapped and not any(
            value is default or value == default for default in DEFAULT_ROW_VALUES
        ):
            report.transform(f"{label} {column} (kept under native)")


def _datetime(epoch: Any) -> datetime | None:
    if isinstance(epoch, int | float) and epoch > 0:
        return datetime.fromtimestamp(epoch, tz=UTC)
    return None


def _rfc3339(epoch: Any) -> str | None:
    moment = _datetime(epoch)
    return format_time(moment) if moment else None


# --- writing -------------------------------------------------------------------------------------


def record_from_session(
    session: NeutralSession, *, options: WriteOptions, report: MappingReport
) -> dict[str, Any]:
    """Neutral session → one export record, as `SessionDB.import_sessions` takes it."""
    native = dict(session.meta.get("native") or {}) if session.agent == NAME else {}
    inactive = native.pop("inactive_messages", [])
    started = _epoch(session.meta.get("created_at")) or next(
        (m.created_at.timestamp() for m in session.messages if m.created_at), None
    )
    if started is None:
        started = datetime.now(UTC).timestamp()
        report.synthesize("started_at (the time of writing; the source has no timestamps)")
    rows = _rows(session, start=started, report=report)
    for row in inactive:  # put compacted rows back where their id places them
        position = next((i for i, other in enumerate(rows) if _after(other, row)), len(rows))
        rows.insert(position, row)
    if native:
        return {**native, "messages": rows}
    return _new_session_row(session, rows, started=started, options=options, report=report)


def _after(row: dict[str, Any], inactive: dict[str, Any]) -> bool:
    return (
        isinstance(row.get("id"), int) and isinstance(inactive.get("id"), int) and row["id"] > inactive["id"]
    )


def _rows(session: NeutralSession, *, start: float, report: MappingReport) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    tool_names: dict[str, str] = {}
    last_time = start
    for message in session.messages:
        native = message.metadata.get("native")
        if message.metadata.get("agent_source") == NAME and isinstance(native, dict):
            rows.append(native)
            last_time = native.get("timestamp") or last_time
            continue
        row = _row_from_message(message, tool_names=tool_names, report=report)
        if row["timestamp"] is None:
            row["timestamp"] = last_time
            report.synthesize("message timestamp (the previous message's, or the session start)")
        last_time = row["timestamp"]
        rows.append(row)
    return rows


def _row_from_message(
    message: MessageIn, *, tool_names: dict[str, str], report: MappingReport
) -> dict[str, Any]:
    for call in message.tool_calls or []:
        tool_names[call.id] = call.function.name
    row: dict[str, Any] = {
        "role": message.role,
        "content": message.model_dump(mode="json", include={"content"})["content"],
        "tool_call_id": message.tool_call_id,
        "tool_calls": [call.model_dump(mode="json") for call in message.tool_calls]
        if message.tool_calls
        else None,
        "tool_name": (message.name or tool_names.get(message.tool_call_id or ""))
        if message.role == "tool"
        else None,
        "timestamp": message.created_at.timestamp() if message.created_at else None,
        "finish_reason": "tool_calls" if message.tool_calls else None,
        "reasoning": None,
        "active": 1,
    }
    thinking = message.thinking
    if thinking is not None and thinking.content:
        if thinking.encrypted:
            report.drop("encrypted thinking (Hermes keeps only plain reasoning text)")
        else:
            row["reasoning"] = thinking.content
            if thinking.signature:
                report.drop("thinking signature")
    if message.name and message.role != "tool":
        report.drop("message name")
    report_unwritten(message, report=report, keeps_times=True)
    return row


def _new_session_row(
    session: NeutralSession,
    rows: list[dict[str, Any]],
    *,
    started: float,
    options: WriteOptions,
    report: MappingReport,
) -> dict[str, Any]:
    session_id = hermes_session_id(started, session.agent, session.native_id)
    times = [row["timestamp"] for row in rows if row.get("timestamp")]
    report.synthesize("Hermes session id")
    report.note("source is set to 'cli' so the session shows under `hermes -c` and the pickers")
    cwd = options.cwd or session.meta.get("cwd")
    return {
        "id": session_id,
        "source": "cli",
        "model": session.meta.get("model"),
        "system_prompt": session.meta.get("system_prompt"),
        "parent_session_id": None,
        "started_at": started,
        "ended_at": max(times) if times else None,
        "message_count": len(rows),
        "tool_call_count": sum(len(row.get("tool_calls") or []) for row in rows),
        "cwd": str(cwd) if cwd else None,
        "title": session.meta.get("title"),
        "messages": rows,
    }


def hermes_session_id(started: float, agent: str, native_id: str) -> str:
    """`YYYYMMDD_HHMMSS_<6 hex>` like Hermes' CLI ids, deterministic for a given source session."""
    stamp = datetime.fromtimestamp(started, tz=UTC).strftime("%Y%m%d_%H%M%S")
    return f"{stamp}_{stable_id(agent, native_id)[:6]}"


def _epoch(value: Any) -> float | None:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    return float(value) if isinstance(value, int | float) else None
