"""Qwen Code adapter: `<qwen dir>/projects/<sanitised cwd>/chats/<session uuid>.jsonl` ⇄ neutral.

Format facts: README.md in this package and tests/fixtures/real/qwen-code (Qwen Code 0.24.4). The qwen
dir is `$QWEN_RUNTIME_DIR`, else `$QWEN_HOME`, else `~/.qwen`; the project folder is the cwd with every
character outside `[A-Za-z0-9]` replaced by `-`. A chat file only grows (Qwen Code appends records, a
resume included), so capture reads the lines after a byte offset (`read_since`). Parsing lives in
read.py, rendering in write.py.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ...shell import command_line
from ..base import Adapter, MappingReport, NeutralSession, WriteOptions, WrittenSession
from ..gemini.incremental import head_of, new_lines
from . import DISPLAY_NAME, NAME
from .read import AGENT, RecordMapper, session_facts
from .write import ChatWriter, session_uuid

CURSOR_VERSION = 1


def qwen_dir(env: Mapping[str, str]) -> Path:
    """Where Qwen Code keeps its projects: QWEN_RUNTIME_DIR, else QWEN_HOME, else ~/.qwen."""
    home = env.get("HOME") or str(Path.home())
    for key in ("QWEN_RUNTIME_DIR", "QWEN_HOME"):
        value = env.get(key)
        if value:
            return Path(home + value[1:] if value == "~" or value.startswith("~/") else value)
    return Path(home) / ".qwen"


def project_folder(cwd: Path | str) -> str:
    return re.sub(r"[^a-zA-Z0-9]", "-", str(cwd))


def chat_files(paths: Sequence[Path]) -> list[Path]:
    """Files named; folders searched recursively for `chats/*.jsonl`."""
    found: dict[Path, None] = {}
    for path in map(Path, paths):
        if path.is_dir():
            found.update(dict.fromkeys(sorted(p for p in path.rglob("*.jsonl") if p.parent.name == "chats")))
        else:
            found[path] = None
    return list(found)


def usable(cursor: dict[str, Any] | None, head: str, size: int) -> bool:
    """A cursor this version wrote for this very file (same first line), else start over: a full read,
    whose messages the store already has, is always safe."""
    return (isinstance(cursor, dict) and cursor.get("v") == CURSOR_VERSION and cursor.get("head") == head
            and isinstance(cursor.get("offset"), int) and 0 <= cursor["offset"] <= size
            and isinstance(cursor.get("seen"), dict) and all(isinstance(v, int) for v in cursor["seen"].values())
            and isinstance(cursor.get("facts"), dict) and isinstance(cursor.get("session"), str))


def read_since(path: Path, cursor: dict[str, Any] | None) -> tuple[NeutralSession, dict[str, Any]]:
    """The session in `path` with only the records after `cursor` (all of them the first time)."""
    report = MappingReport(agent=AGENT, direction="read")
    head = head_of(path)
    fresh = not usable(cursor, head, path.stat().st_size)
    start = 0 if fresh or cursor is None else int(cursor["offset"])
    records, offset = new_lines(path, start, report)
    known = {} if fresh or cursor is None else cursor
    first = next((r for r in records if isinstance(r, dict) and isinstance(r.get("sessionId"), str)), {})
    session_id = str(known.get("session") or first.get("sessionId") or path.stem)
    if any(isinstance(r, dict) and r.get("sessionId") not in (None, session_id) for r in records):
        report.transform("records naming another sessionId (Qwen Code refuses such a file) → read as this session")
    mapper = RecordMapper(session_id, report, seen=Counter(known.get("seen") or {}))
    messages = mapper.map(records)
    found = session_facts(records)
    latest = {key: found[key] for key in ("model", "version") if key in found}
    facts = {**found, **(known.get("facts") or {}), **latest}  # the first title, cwd… stay; the latest model
    session = NeutralSession(agent=AGENT, native_id=session_id, messages=messages, meta=dict(facts), report=report,
                             source_path=path)
    return session, {"v": CURSOR_VERSION, "head": head, "offset": offset, "session": session_id,
                     "seen": dict(mapper.seen), "facts": facts}


class QwenCodeAdapter(Adapter):
    name = NAME
    display_name = DISPLAY_NAME

    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        sessions = []
        for path in chat_files(paths):
            if path.stat().st_size == 0:
                continue
            session, _ = read_since(path, None)
            sessions.append(session)
        return sessions

    def read_incremental(
        self, path: Path, cursor: dict[str, Any] | None
    ) -> tuple[list[NeutralSession], dict[str, Any]]:
        session, next_cursor = read_since(Path(path), cursor)
        return ([session] if session.messages else []), next_cursor

    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        report = MappingReport(agent=AGENT, direction="write")
        session_id = session_uuid(session)
        cwd = str(options.cwd or session.meta.get("cwd") or Path.cwd())
        records = ChatWriter(session, options, report, session_id, cwd).render()
        if not records:
            raise ValueError("nothing to write: the session holds no message Qwen Code can show")
        target = Path(out_dir) / f"{session_id}.jsonl"
        text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
        atomic_write(target, text, within=Path(out_dir))
        command = command_line(["qwen", "--resume", session_id], cwd=cwd)
        return WrittenSession(native_id=session_id, files=[target], report=report, resume_command=command)

    def install_dir(self, cwd: Path, env: Mapping[str, str]) -> Path | None:
        return qwen_dir(env) / "projects" / project_folder(cwd) / "chats"

    def install(
        self, session: NeutralSession, *, cwd: Path, env: Mapping[str, str], options: WriteOptions
    ) -> WrittenSession:
        target = self.install_dir(cwd, env)
        assert target is not None
        return self.write(session, target, WriteOptions(thinking=options.thinking, cwd=Path(cwd), extra=options.extra))
