"""Aider (aider-chat 0.86): the project's `.aider.chat.history.md` ↔ neutral sessions.

One history file is one session (Aider has no session id: README.md in this package). Each block of
the file (history.py) becomes one message that keeps its exact text under `metadata["native"]`, so
that an Aider session written back into Aider is the same file. Aider's own output (`> ` lines) and
its start lines are scaffolding; so are the `/command` prompts the user typed to Aider itself.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from ... import scaffolding
from ...files import safe_name
from ...schema import MessageIn, Role, format_time
from ..base import Adapter, FormatError, MappingReport, NeutralSession, WriteOptions, WrittenSession, stable_id
from . import DISPLAY_NAME, NAME
from .history import (
    HEADER,
    ID_LINE,
    Block,
    cut,
    escaped_lines,
    native_id,
    reply_piece,
    started_at,
    tail,
    tool_text,
    user_piece,
    user_text,
)

DEFAULT_FILE = ".aider.chat.history.md"
FILE_GLOBS = (DEFAULT_FILE, ".aider.chat.history.*.md")
CURSOR_VERSION = 1


class AiderAdapter(Adapter):
    name = NAME
    display_name = DISPLAY_NAME
    cannot_hold: ClassVar[frozenset[str]] = frozenset({"tool pair"})  # written as reply text, reported

    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        sessions = []
        for path in history_files(paths):
            session, _ = read_file(path, None, final=True)
            if session is not None:
                sessions.append(session)
        return sessions

    def read_incremental(
        self, path: Path, cursor: dict[str, Any] | None
    ) -> tuple[list[NeutralSession], dict[str, Any]]:
        session, new_cursor = read_file(path, cursor, final=False)
        return ([session] if session is not None and session.messages else []), new_cursor

    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        report = MappingReport(agent=NAME, direction="write")
        new_id = f"mm-{uuid.uuid4().hex[:16]}"  # every write is a new session: a fork, never a copy
        text = render(session, new_id, options=options, report=report)
        target = free_file(out_dir, new_id)
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(target, "x", encoding="utf-8") as handle:  # never over a history Aider may be writing
            handle.write(text)
        report.note("resume it in its folder with `aider --restore-chat-history`"
                    + (f" --chat-history-file {target.name}" if target.name != DEFAULT_FILE else ""))
        return WrittenSession(native_id=new_id, files=[target], report=report,
                              resume_command=resume_command(out_dir, target))

    def install_dir(self, cwd: Path, env: Any) -> Path:
        return cwd  # Aider looks for its history in the project folder


def resume_command(folder: Path, target: Path) -> str:
    from ...shell import command_line

    words = ["aider", "--restore-chat-history"]
    if target.name != DEFAULT_FILE:
        words += ["--chat-history-file", target.name]
    return command_line(words, cwd=str(folder))


def free_file(folder: Path, session_id: str) -> Path:
    """The default history file when the folder has none (or an empty one), else one of our own:
    Aider reads one history per file, and another conversation's file is never written over."""
    default = folder / DEFAULT_FILE
    try:
        if not default.exists():
            return default
        if default.is_file() and default.stat().st_size == 0:
            default.unlink()  # an empty history (Aider started and wrote nothing): nothing to keep
            return default
    except OSError:
        pass
    return folder / f".aider.chat.history.{session_id}.md"


def history_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted({p for pattern in FILE_GLOBS for p in path.glob(pattern) if p.is_file()}))
        else:
            files.append(path)
    return files


# --- reading -------------------------------------------------------------------------------------


def read_file(path: Path, cursor: dict[str, Any] | None, *, final: bool) -> tuple[NeutralSession | None, dict[str, Any]]:
    """The file's session with the blocks after the cursor (None: all), and the new cursor."""
    data = path.read_bytes()
    session_id = native_id(path, data)
    if session_id is None:
        return None, {"v": CURSOR_VERSION, "offset": 0}
    start, started = _resume_point(cursor, session_id, len(data))
    blocks, stopped = cut(data, start, final=final)
    report = MappingReport(agent=NAME, direction="read")
    messages: list[MessageIn] = []
    native: dict[str, Any] = {"file": path.name}
    for block in blocks:
        if block.kind == "header":
            started = block.body[0][len(HEADER):].strip()
        if block.kind == "id":
            native["id_line"] = block.raw
            continue
        messages.append(_message(block, session_id, started, report))
    if final:
        native["tail"] = tail(data, blocks)
    first_user = next((m for m in messages if m.role == "user" and "scaffold" not in m.metadata), None)
    head = next((b for b in blocks if b.kind == "header"), None)
    first = started_at(head.body[0]) if head is not None and start == 0 else None
    meta = {"agent_source": NAME, "cwd": str(path.resolve().parent), "native": native,
            "title": str(first_user.content)[:80] if first_user else None,
            "created_at": format_time(first) if first else None}
    session = NeutralSession(agent=NAME, native_id=session_id, messages=messages,
                             meta={k: v for k, v in meta.items() if v is not None}, report=report, source_path=path)
    return session, {"v": CURSOR_VERSION, "offset": stopped, "native_id": session_id, "started": started}


def _resume_point(cursor: dict[str, Any] | None, session_id: str, size: int) -> tuple[int, str | None]:
    """Where the last read stopped; the start for a first read, a cursor of another version or
    session, or a file that shrank (rewritten: read anew, the append_ids of what is stored repeat)."""
    if not cursor or cursor.get("v") != CURSOR_VERSION or cursor.get("native_id") != session_id:
        return 0, None
    offset, started = cursor.get("offset"), cursor.get("started")
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= size:
        return 0, None
    return offset, started if isinstance(started, str) else None


SCAFFOLD_KIND = {"header": "environment", "tool": "other"}


def _message(block: Block, session_id: str, started: str | None, report: MappingReport) -> MessageIn:
    metadata: dict[str, Any] = {"agent_source": NAME, "native": {"kind": block.kind, "raw": block.raw}}
    role: Role
    if block.kind == "user":
        role, text = "user", user_text(block.body)
        if text.startswith("/"):  # an Aider command (/run, /add …): said to Aider, not to the model
            metadata[scaffolding.KEY] = "command"
    elif block.kind == "assistant":
        role, text = "assistant", "".join(block.body).strip()
    else:
        role = "system"
        text = block.body[0][2:].strip() if block.kind == "header" else tool_text(block.body)
        metadata[scaffolding.KEY] = SCAFFOLD_KIND[block.kind]
        report.transform(f"Aider's own output lines ({block.kind}: kept, marked as scaffolding)")
    moment = started_at(HEADER + started) if started else None
    return MessageIn(role=role, content=text, append_id=stable_id(NAME, session_id, block.start, prefix="ai_"),
                     created_at=moment, metadata=metadata)


# --- writing -------------------------------------------------------------------------------------


def render(session: NeutralSession, session_id: str, *, options: WriteOptions, report: MappingReport) -> str:
    """The history file: our id line, then each message as Aider writes it (its own blocks as read)."""
    if not safe_name(session_id):
        raise FormatError(f"Aider session id {session_id!r} is not a plain name")
    pieces = [f"{ID_LINE}{session_id}\n"]
    reply: list[str] = []  # consecutive assistant-side texts: Aider reads them as one reply
    calls: dict[str, str] = {}

    def flush() -> None:
        if reply:
            text = "\n\n".join(reply)
            if escaped_lines(text):
                report.transform("reply lines that Aider would read as its own (`> `, `#`): one space added",
                                 escaped_lines(text))
            pieces.append(reply_piece(text))
            reply.clear()

    for message in session.messages:
        native = message.metadata.get("native")
        if message.metadata.get("agent_source") == NAME and isinstance(native, dict) and "raw" in native:
            flush()
            pieces.append(str(native["raw"]))
            continue
        if message.role == "system":
            report.drop("system text (Aider's history has no system messages; Aider writes its own prompt)")
            continue
        if message.role == "user":
            flush()
            pieces.append(user_piece(_text(message, report)))
            continue
        reply.extend(_reply_texts(message, calls, options, report))
    flush()
    if session.agent == NAME and isinstance(session.meta.get("native"), dict):
        pieces.append(str(session.meta["native"].get("tail") or ""))
    if any(m.created_at for m in session.messages if m.metadata.get("agent_source") != NAME):
        report.drop("per-message timestamps (Aider's history has only the start time of each run)")
    return "".join(pieces)


def _text(message: MessageIn, report: MappingReport) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    texts = []
    for part in content or []:
        if part.type == "text":
            texts.append(getattr(part, "text", "") or "")
        else:
            report.drop(f"{part.type} content (Aider's history holds text only)")
    return "\n".join(texts)


def _reply_texts(message: MessageIn, calls: dict[str, str], options: WriteOptions,
                 report: MappingReport) -> list[str]:
    """An assistant turn or a tool result as reply text: Aider's history has no tool calls, so a call
    and its result are written as words the model reads on resume (a mapped loss, reported)."""
    texts: list[str] = []
    if message.thinking is not None and message.thinking.content and not message.thinking.encrypted:
        if options.thinking == "text":
            texts.append(f"Thinking: {message.thinking.content}")
            report.transform("thinking (written as reply text, as asked)")
        else:
            report.drop("thinking (Aider's history has no reasoning)")
    text = _text(message, report)
    if message.role == "tool":
        name = calls.get(message.tool_call_id or "", message.name or "tool")
        texts.append(f"Result of {name}: {text}")
        report.transform("tool results (written as reply text: Aider's history holds no tool calls)")
        return texts
    if text.strip():
        texts.append(text)
    for call in message.tool_calls or []:
        calls[call.id] = call.function.name
        texts.append(f"Called {call.function.name} {_arguments(call.function.arguments)}")
        report.transform("tool calls (written as reply text: Aider's history holds no tool calls)")
    return texts


def _arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        return arguments
