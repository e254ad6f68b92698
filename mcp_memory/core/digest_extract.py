"""The lines of a digest taken from stored messages: open questions, files and commands touched.

Extractive only: a line quotes the stored text (shortened), never paraphrases it, and names the
messages it comes from. Agents' scaffolding (whole messages or content parts, scaffolding.py) and
echoes of mcp-memory's own tools are never quoted, and calls of our own tools are no "commands".

Definitions (kept simple on purpose, README "Digests"):
- an open question is a user or assistant turn whose conversation text ends with "?" (or "？")
  and after which the same session has no turn with text by the other party (user ↔ assistant):
  among the messages the digest reads and, for a day, the session's turns after that day;
- a file is the value of a path argument (file_path, filePath, path, notebook_path,
  absolute_path, paths) of an agent's tool call, or a file named in an apply_patch input;
- a command is the `command` / `cmd` argument of a tool call (an argv list is joined with
  shell quoting; `bash -lc SCRIPT` gives SCRIPT).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import scaffolding
from ..digest_results import DigestLine, DigestSource
from ..search.snippet import shorten

QUOTE_CHARS = 200
PATH_CHARS = 300
FILE_KEYS = ("file_path", "filePath", "path", "notebook_path", "absolute_path")
LIST_FILE_KEYS = ("paths",)
COMMAND_KEYS = ("command", "cmd")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
QUESTION_END = ("?", "？")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")


@dataclass(slots=True)
class Row:
    """One stored message as the digest reads it (tool results without their content)."""

    session_id: str
    seq: int
    role: str
    payload: dict[str, Any]


@dataclass(slots=True)
class Touched:
    """Files or commands in first-seen order, each with its sources and the tools that touched it."""

    items: dict[str, tuple[list[DigestSource], list[str]]] = field(default_factory=dict)

    def add(self, key: str, source: DigestSource, tool: str) -> None:
        sources, tools = self.items.setdefault(key, ([], []))
        if not any(s.session_id == source.session_id and s.seq == source.seq for s in sources):
            sources.append(source)
        if tool and tool not in tools:
            tools.append(tool)


def text_of(payload: Mapping[str, Any]) -> str:
    """The conversation text of a message: its text parts without scaffolding parts."""
    content = scaffolding.conversation_content(payload.get("content"))
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        texts = [p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
        return "\n".join(texts).strip()
    return ""


def conversation_rows(rows: list[Row]) -> list[Row]:
    """The rows a digest may quote: no scaffolding message, no echo of our tools."""
    calls = scaffolding.memory_calls(r.payload for r in rows)
    return [r for r in rows if scaffolding.message_kind(r.payload) is None
            and scaffolding.echo_tool(r.payload, calls) is None]


def open_questions(rows: list[Row], later: list[Row] | None = None) -> list[DigestLine]:
    """Questions (last sentence of a user/assistant turn ending in '?') among `rows` with no later
    turn with text by the other party in the same session, among `rows` and `later` (the turns after
    the digest's window)."""
    lines = []
    reportable = len(rows)
    rows = rows + (later or [])
    for index, row in enumerate(rows[:reportable]):
        if row.role not in ("user", "assistant"):
            continue
        text = text_of(row.payload)
        if not text.endswith(QUESTION_END):
            continue
        other = "assistant" if row.role == "user" else "user"
        answered = any(r.session_id == row.session_id and r.role == other and text_of(r.payload)
                       for r in rows[index + 1:])
        if not answered:
            quote = shorten(_one_line(_SENTENCE.split(text)[-1]), QUOTE_CHARS)
            lines.append(DigestLine(kind="question", text=f'{row.role}: "{quote}" ({row.session_id}#{row.seq})',
                                    sources=[DigestSource(session_id=row.session_id, seq=row.seq)]))
    return lines


def touched(rows: Iterable[Row]) -> tuple[Touched, Touched]:
    """(files, commands) of the agents' own tool calls; calls of mcp-memory's tools are left out."""
    files, commands = Touched(), Touched()
    for row in rows:
        for call in row.payload.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping) or scaffolding.memory_tool(function.get("name")) is not None:
                continue
            name = function.get("name")
            tool = _one_line(name)[:60] if isinstance(name, str) else ""
            source = DigestSource(session_id=row.session_id, seq=row.seq)
            arguments = _arguments(function.get("arguments"))
            for path in _paths(arguments):
                files.add(path, source, tool)
            command = _command(arguments)
            if command:
                commands.add(command, source, tool)
    return files, commands


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {"input": raw}  # a custom tool's free-form input (Codex apply_patch)
    return raw


def _paths(arguments: Any) -> list[str]:
    if not isinstance(arguments, Mapping):
        return []
    found = [arguments[k] for k in FILE_KEYS if isinstance(arguments.get(k), str)]
    for key in LIST_FILE_KEYS:
        if isinstance(arguments.get(key), list):
            found.extend(p for p in arguments[key] if isinstance(p, str))
    for key in ("input", "patch"):
        if isinstance(arguments.get(key), str):
            found.extend(m.strip() for m in _PATCH_FILE.findall(arguments[key]))
    return [shorten(_one_line(p), PATH_CHARS) for p in found if p.strip()]


def _command(arguments: Any) -> str | None:
    if not isinstance(arguments, Mapping):
        return None
    for key in COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if len(value) == 3 and value[1] in ("-c", "-lc") and value[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh"):
                value = value[2]
            else:
                value = shlex.join(value)
        if isinstance(value, str) and value.strip():
            return shorten(_one_line(value), QUOTE_CHARS)
    return None


def _one_line(text: str) -> str:
    return _CONTROL.sub(" ", text).strip()


def touched_lines(kind: str, found: Touched) -> list[DigestLine]:
    """One line per file or command: the quoted value, the tools, the messages."""
    lines = []
    for value, (sources, tools) in found.items.items():
        where = ", ".join(f"{s.session_id}#{s.seq}" for s in sources[:5])
        more = f" +{len(sources) - 5} more" if len(sources) > 5 else ""
        via = f" [{', '.join(tools)}]" if tools else ""
        lines.append(DigestLine(kind=kind, text=f"`{value}`{via} ({where}{more})",  # type: ignore[arg-type]
                                sources=sources))
    return lines
