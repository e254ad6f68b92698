"""GitHub Copilot CLI adapter: `~/.copilot/session-state/<uuid>/events.jsonl` ⇄ neutral.

Format facts: README.md in this package and tests/fixtures/real/copilot (Copilot CLI 1.0.102).
Parsing lives in read.py, rendering in write.py; both keep Copilot's own events, so that a session
read from Copilot is written back event for event.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ...shell import command_line
from ..base import Adapter, FormatError, MappingReport, NeutralSession, WriteOptions, WrittenSession
from . import DISPLAY_NAME, NAME
from .hooks import copilot_home
from .read import ReadState, read_events
from .write import NAMESPACE, EventWriter, session_uuid, stamp, workspace_yaml


def events_files(paths: Sequence[Path]) -> list[Path]:
    """Files named; folders searched for `events.jsonl` (a session folder, session-state, ~/.copilot)."""
    found: dict[Path, None] = {}
    for path in map(Path, paths):
        if path.is_dir():
            found.update(dict.fromkeys(sorted(path.rglob("events.jsonl"))))
        else:
            found[path] = None
    return list(found)


def read_since(path: Path, cursor: dict[str, Any] | None) -> tuple[NeutralSession, ReadState]:
    """The session in `path` with only what is new since `cursor`, and the state to go on from. A
    file shorter than the cursor's offset is another file: it is read from the start."""
    report = MappingReport(agent=NAME, direction="read")
    state = ReadState.from_cursor(cursor) if cursor else ReadState(session_id=path.parent.name)
    with path.open("rb") as handle:
        size = handle.seek(0, 2)
        if state.offset > size:
            state = ReadState(session_id=path.parent.name)
        handle.seek(state.offset)
        data = handle.read()
    if not state.offset and data and not data.lstrip().startswith(b"{"):
        raise FormatError(f"{path} is not a Copilot events file (it does not start with a JSON event)")
    messages = read_events(data, state, report)
    header = state.header or {}
    session_id = str((header.get("data") or {}).get("sessionId") or state.session_id)
    state.session_id = session_id
    meta: dict[str, Any] = {"agent_source": NAME, **{k: v for k, v in state.facts.items() if v is not None}}
    session = NeutralSession(agent=NAME, native_id=session_id, messages=messages, meta=meta, report=report,
                             source_path=path)
    return session, state


class CopilotAdapter(Adapter):
    name = NAME
    display_name = DISPLAY_NAME

    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        sessions = []
        for path in events_files(paths):
            session, state = read_since(path, None)
            session.meta["native"] = {"tail": state.before}
            if state.before:
                session.report.note(f"{len(state.before)} event(s) after the last message kept in the session meta")  # type: ignore[union-attr]
            sessions.append(session)
        return sessions

    def read_incremental(
        self, path: Path, cursor: dict[str, Any] | None
    ) -> tuple[list[NeutralSession], dict[str, Any]]:
        """Only the messages of lines new since `cursor`; the events after the last message wait in
        the cursor for the message they belong to."""
        session, state = read_since(path, cursor)
        return [session], state.to_cursor()

    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        report = MappingReport(agent=NAME, direction="write")
        session_id = str(options.extra.get("session_id") or session_uuid(session))
        events = EventWriter(session, session_id, options, report).render()
        folder = Path(out_dir) / session_id
        target = folder / "events.jsonl"
        atomic_write(target, "".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in events),
                     within=Path(out_dir))
        cwd = options.cwd or session.meta.get("cwd")
        title = session.meta.get("title")
        created, updated = events[0]["timestamp"], events[-1]["timestamp"]
        yaml = workspace_yaml(session_id, str(cwd) if cwd else None, title if isinstance(title, str) else None,
                              created, updated or stamp(None))
        atomic_write(folder / "workspace.yaml", yaml, within=Path(out_dir))
        command = command_line(["copilot", f"--resume={session_id}"], cwd=str(cwd) if cwd else None)
        return WrittenSession(native_id=session_id, files=[target], report=report, resume_command=command)

    def install_dir(self, cwd: Path, env: Mapping[str, str]) -> Path | None:
        return copilot_home(env) / "session-state"

    def install(
        self, session: NeutralSession, *, cwd: Path, env: Mapping[str, str], options: WriteOptions
    ) -> WrittenSession:
        """Into `session-state/`, under a session id no folder there has yet: Copilot's own session
        (a round trip) or an earlier export of the same session is never overwritten."""
        target = self.install_dir(cwd, env)
        assert target is not None
        session_id, attempt = session_uuid(session), 0
        while (target / session_id).exists():
            attempt += 1
            session_id = str(uuid.uuid5(NAMESPACE, f"{session_uuid(session)}\x1f{len(session.messages)}\x1f{attempt}"))
        extra = {**options.extra, "session_id": session_id}
        return self.write(session, target, WriteOptions(thinking=options.thinking, cwd=Path(cwd), extra=extra))
