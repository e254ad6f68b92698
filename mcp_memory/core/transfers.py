"""Transfers between stored sessions and agents' native files: import and export.

Every transport reaches them through the Service (`import_session`, `export_session`, declared in
operations.py); the CLI also calls `import_paths` and `export` below for what only a local caller
asks for (several paths at once, a folder to write into, progress). The agents are reached from
here only, through their adapters (agents/), which never touch the database; storing and the relay
lineage are in core/imports.py.

Files on the server's machine: a Service built for a caller on the same machine (the CLI, the stdio
MCP server, the library) carries a `Local`; a Service that serves remote callers (serve-http) has
none, and then `path` and `install` are refused as [forbidden], so that a token can neither read
nor write the server's files: a remote caller sends `content` and receives `files`. Paths are
built, never pasted: `install` writes where the adapter's own naming puts the session of `cwd`,
and `content` is written under a temporary folder by a name checked to be one plain file name.
"""

from __future__ import annotations

import base64
import json
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import agents, scaffolding
from ..errors import Forbidden, Invalid, McpMemoryError
from ..results import Exported, ImportResult, NativeFile, Session
from ..schema import MappingReport, MessageIn, NeutralSession
from .imports import record_export, store_sessions

if TYPE_CHECKING:
    from ..agents.base import Adapter, WrittenSession
    from .service import Service

FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # `content`'s name: one plain file name
THINKING = ("drop", "text")


@dataclass(frozen=True)
class Local:
    """The caller's machine, for services that run on it: the environment that says where each agent
    keeps its files (HOME, CLAUDE_CONFIG_DIR, CODEX_HOME, …) and the directory relative paths start at."""

    environ: Mapping[str, str]
    cwd: Path


def local_of(service: Service, what: str) -> Local:
    if service.local is None:
        raise Forbidden(f"{what} names the server's own files, which a remote caller cannot use "
                        "(send content to import, leave install out to receive the files)")
    return service.local


def adapter_of(agent: str) -> Adapter:
    try:
        return agents.adapter_for(agent)
    except ValueError as exc:
        raise Invalid(f"agent: {exc}") from None


# import -------------------------------------------------------------------------------------------
def import_session(
    service: Service, agent: str, *, path: str | None, content: str, name: str | None, project_id: str | None,
) -> ImportResult:
    """The import_session operation: exactly one of a path (local callers) or a file's text."""
    if (path is None) == (not content):
        raise Invalid("import_session takes exactly one of path and content")
    if path is not None:
        local = local_of(service, "path")
        return import_paths(service, agent, [local.cwd / Path(path).expanduser()], project_id=project_id)
    return import_content(service, agent, content, name=name, project_id=project_id)


def import_paths(
    service: Service, agent: str, paths: Sequence[Path], *, project_id: str | None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """Native session files or folders → stored sessions (idempotent)."""
    adapter = adapter_of(agent)
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise Invalid(f"path: no such file or folder: {', '.join(missing)}")
    sessions = _read(adapter, list(paths), ", ".join(map(str, paths)))
    return _store(service, adapter, sessions, project_id=project_id, on_progress=on_progress)


def import_content(
    service: Service, agent: str, content: str, *, name: str | None, project_id: str | None,
) -> ImportResult:
    """One native file's text → stored sessions. It is read from a private temporary folder under
    `name` (its stem can be the native session id, its suffix the format)."""
    adapter = adapter_of(agent)
    name = name or default_name(content)
    if not FILE_NAME.fullmatch(name) or set(name) == {"."}:
        raise Invalid("name must be one plain file name: letters, digits, '.', '_' or '-', at most 200 "
                      "characters, starting with a letter or digit")
    with tempfile.TemporaryDirectory(prefix="mcp-memory-import-") as folder:
        file = Path(folder) / name
        file.write_text(content, encoding="utf-8")
        sessions = _read(adapter, [file], name)
    for neutral in sessions:
        neutral.source_path = Path(name)
    return _store(service, adapter, sessions, project_id=project_id, on_progress=None)


def default_name(content: str) -> str:
    """session.json when the text is one JSON document, else session.jsonl (one record a line)."""
    try:
        json.loads(content)
    except ValueError:
        return "session.jsonl"
    return "session.json"


def _read(adapter: Adapter, paths: list[Path], label: str) -> list[NeutralSession]:
    try:
        return adapter.read_files(paths)
    except (agents.FormatError, OSError) as exc:  # not this agent's format: nothing stored
        raise Invalid(f"cannot read {adapter.display_name} sessions from {label} ({exc})") from None


def _store(
    service: Service, adapter: Adapter, sessions: list[NeutralSession], *, project_id: str | None,
    on_progress: Callable[[int, int], None] | None,
) -> ImportResult:
    """Store the sessions with messages; those without (files of another agent, empty sessions) are
    named in `skipped`, and when nothing is left the answer is [invalid] with nothing stored."""
    skipped = sorted({str(s.source_path or s.native_id) for s in sessions if not s.messages})
    sessions = [s for s in sessions if s.messages]
    if not sessions:
        raise Invalid(f"no {adapter.display_name} sessions with messages found"
                      + (f" in {', '.join(skipped[:5])}" if skipped else ""))
    report = MappingReport(adapter.name, "read")
    for neutral in sessions:
        if neutral.report is not None:
            report.merge(neutral.report)
    stored = store_sessions(service, sessions, project_id=project_id, on_progress=on_progress)
    return ImportResult(sessions=stored, report=report.to_dict(), skipped=skipped)


# export -------------------------------------------------------------------------------------------
def export(
    service: Service, session_id: str, to: str, *, install: bool = False, cwd: str | None = None,
    options: Mapping[str, str] | None = None, out: Path | None = None,
) -> Exported:
    """A stored session in agent `to`'s native format: written into `out` (a local caller's folder),
    installed where the agent looks (`install`), or else returned as the files' contents. The
    written session is read back as the agent will read it and recorded as a relay, so that its
    continuation is imported as a fork (core/imports.py)."""
    adapter = adapter_of(to)
    local = local_of(service, "install") if install else (local_of(service, "out") if out else service.local)
    session = service.get_session(session_id)
    folder, rule = _project_dir(cwd, session, local, install=install)
    settings = write_options(to, options, folder)
    neutral = neutral_session(session, all_messages(service, session_id))
    left_out = 0
    if neutral.agent != to:  # another agent's scaffolding is not a turn of this one (scaffolding.py)
        neutral.messages, left_out = scaffolding.without_scaffolding(neutral.messages)
    result = Exported(session_id=session_id, agent=to, native_id="", report={},
                      cwd=str(folder) if folder is not None else None, cwd_rule=rule)
    recorded = session.meta.get("cwd")
    if rule == "here" and isinstance(recorded, str) and recorded:
        result.warnings.append(f"the session was recorded in {recorded}, which is not on this host: installed for "
                               f"{folder} (the current folder; --cwd chooses another)")
    try:
        if install:
            assert local is not None and settings.cwd is not None
            written = adapter.install(neutral, cwd=settings.cwd, env=local.environ, options=settings)
            result.installed, result.resume = [str(f) for f in written.files], written.resume_command
            _relay(service, adapter, written, result)
        elif out is not None:
            out.mkdir(parents=True, exist_ok=True)
            written = adapter.write(neutral, out, settings)
            result.written = [str(f) for f in written.files]
            _relay(service, adapter, written, result)
        else:
            with tempfile.TemporaryDirectory(prefix="mcp-memory-export-") as scratch:
                written = adapter.write(neutral, Path(scratch), settings)
                result.files = [native_file(f, Path(scratch)) for f in written.files]
                _relay(service, adapter, written, result)
    except (ValueError, OSError, RuntimeError) as exc:  # bad meta, an unwritable folder, a failed import
        raise Invalid(f"cannot export {session_id} to {adapter.display_name}: {exc}") from None
    if left_out:
        written.report.note(f"{left_out} message(s) of {neutral.agent}'s own scaffolding (injected instructions, "
                            "environment blocks, reminders) left out: the target agent writes its own")
    result.native_id, result.report = written.native_id, written.report.to_dict()
    return result


def write_options(agent: str, options: Mapping[str, str] | None, cwd: Path | None) -> agents.WriteOptions:
    """`options`: thinking (drop | text) and the agent's own switches (its `write_options`)."""
    known = agents.get(agent).write_options
    extra: dict[str, Any] = {}
    thinking = "drop"
    for key, value in (options or {}).items():
        if key == "thinking":
            if value not in THINKING:
                raise Invalid(f"options.thinking must be one of {', '.join(THINKING)}")
            thinking = value
        elif key in known:
            extra[key] = value
        else:
            raise Invalid(f"options.{key} is not a switch of {agent} (its switches: "
                          f"{', '.join(['thinking', *known])})")
    return agents.WriteOptions(thinking="text" if thinking == "text" else "drop", cwd=cwd, extra=extra)


def _project_dir(cwd: str | None, session: Session, local: Local | None, *,
                 install: bool) -> tuple[Path | None, str | None]:
    """The project directory the exported session belongs to, and the rule: `cwd` (given), else the
    session's recorded cwd (recorded) — for an install, only when that folder exists on this host,
    since the agent resumes there — else (a local caller) the current directory (here). Relative
    paths start at the local caller's directory; a remote caller's must be absolute (it is written
    into the files, never used as a place to write to)."""
    meta_cwd = session.meta.get("cwd")
    recorded = meta_cwd if isinstance(meta_cwd, str) and meta_cwd and "\x00" not in meta_cwd else None
    chosen: str
    if cwd is not None:
        chosen, rule = cwd, "given"
    elif recorded is not None and not (install and local is not None and not _is_dir(local.cwd / recorded)):
        chosen, rule = recorded, "recorded"
    else:
        return (local.cwd, "here") if local is not None else (None, None)
    if "\x00" in chosen:
        raise Invalid("cwd must not contain U+0000")
    path = Path(chosen).expanduser() if local is not None else Path(chosen)
    if local is not None:
        return local.cwd / path, rule
    if not path.is_absolute() and cwd is not None:
        raise Invalid("cwd must be an absolute path")
    return path, rule


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def native_file(path: Path, root: Path) -> NativeFile:
    data = path.read_bytes()
    name = str(path.relative_to(root))
    try:
        return NativeFile(name=name, content=data.decode("utf-8"))
    except UnicodeDecodeError:
        return NativeFile(name=name, content=base64.b64encode(data).decode("ascii"), encoding="base64")


def _relay(service: Service, adapter: Adapter, written: WrittenSession, result: Exported) -> None:
    """Relay lineage: read the written files back as the target agent will and record which native
    session came from which seq. Exporting stays possible without write rights: the lineage is then
    not recorded, and the result says so."""
    try:
        read_back = adapter.read_files(list(written.files))
        relay = record_export(service, result.session_id, read_back, written.native_id)
    except McpMemoryError as exc:
        result.warnings.append(f"relay lineage not recorded: {exc.render()}")
        return
    except (OSError, agents.FormatError) as exc:
        result.warnings.append(f"relay lineage not recorded: the written files could not be read back ({exc})")
        return
    if relay is not None:
        result.relay = {"snapshot_id": relay.snapshot_id, "carried": len(relay.carried)}


def neutral_session(session: Session, messages: list[MessageIn]) -> NeutralSession:
    """The session as adapters take it. Meta is whatever a project writer put there: only strings
    are taken as the source agent and native id, and adapters check those before they name a file."""
    source = session.meta.get("imported_from") or session.agent_source
    native_id = session.meta.get("native_id")
    return NeutralSession(agent=source if isinstance(source, str) and source else "mcp-memory",
                          native_id=native_id if isinstance(native_id, str) and native_id else session.session_id,
                          messages=messages, meta={**session.meta, "session_id": session.session_id})


def all_messages(service: Service, session_id: str) -> list[MessageIn]:
    """Every message of the session (a fork: with its inherited history), native records included."""
    messages: list[MessageIn] = []
    after = 0
    while True:
        page = service.read_session(session_id, after_seq=after, limit=1000, include_native=True, view="full")
        for m in page.messages:
            data = m.model_dump(mode="json", exclude_none=True)
            for key in ("session_id", "seq", "inherited_from"):
                data.pop(key, None)
            messages.append(MessageIn.model_validate(data))
        after = page.next_after_seq
        if not page.has_more:
            return messages
