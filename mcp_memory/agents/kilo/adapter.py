"""Kilo Code CLI 7.x sessions ⇄ neutral sessions, through the OpenCode adapter.

Kilo Code is an OpenCode fork: `kilo.db` has OpenCode's schema and `kilo export` / `kilo import` OpenCode's
JSON (README.md in this package; tests/fixtures/real/kilo, written by Kilo 7.7.7). So reading and writing
are OpenCode's (opencode/), with the agent's name changed on the way in and out. What differs:
- the store is `$XDG_DATA_HOME/kilo/kilo.db` (default `~/.local/share/kilo/kilo.db`);
- `kilo import` skips, without a word, every message and part whose id the database already holds, so a
  session written for `--install` gets fresh session, message and part ids (same time prefix, new
  random tail): a second export of the same session, or one whose source came from this Kilo, then
  imports whole instead of as an empty session.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ...schema import MessageIn
from ...shell import command_line
from ..base import Adapter, MappingReport, NeutralSession, WriteOptions, WrittenSession
from ..opencode import adapter as opencode
from ..opencode.ids import BASE62
from ..opencode.read import AGENT as OPENCODE
from ..opencode.write import render
from . import DISPLAY_NAME, NAME

IMPORTED = re.compile(r"Imported session:\s*(ses_[0-9A-Za-z]+)")
NATIVE_ID = re.compile(r"(?:ses|msg|prt)_[0-9a-f]{12}[0-9A-Za-z]{14}")
FRESH_IDS = "kilo_fresh_ids"


def default_db_path(environ: Mapping[str, str]) -> Path:
    """`$XDG_DATA_HOME/kilo/kilo.db`, else `~/.local/share/kilo/kilo.db`."""
    data = environ.get("XDG_DATA_HOME")
    if data:
        return Path(data) / "kilo" / "kilo.db"
    home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    return home / ".local" / "share" / "kilo" / "kilo.db"


def as_kilo(sessions: list[NeutralSession]) -> list[NeutralSession]:
    """Sessions the OpenCode reader read from Kilo's files, labelled as Kilo's."""
    for session in sessions:
        session.agent = NAME
        session.meta["agent_source"] = NAME
        if session.report is not None:
            session.report.agent = NAME
        for message in session.messages:
            if message.metadata.get("agent_source") == OPENCODE:
                message.metadata["agent_source"] = NAME
    return sessions


def as_opencode(session: NeutralSession) -> NeutralSession:
    """A Kilo session as the OpenCode writer takes its own (records written back as they are)."""
    if session.agent != NAME:
        return session
    messages = [_relabel(m) for m in session.messages]
    return NeutralSession(agent=OPENCODE, native_id=session.native_id, messages=messages, meta=session.meta,
                          report=session.report, parent_native_id=session.parent_native_id,
                          parent_tool_call_id=session.parent_tool_call_id, source_path=session.source_path)


def _relabel(message: MessageIn) -> MessageIn:
    if message.metadata.get("agent_source") != NAME:
        return message
    return message.model_copy(update={"metadata": {**message.metadata, "agent_source": OPENCODE}})


def fresh_ids(document: dict[str, Any]) -> dict[str, Any]:
    """The import document with every session, message and part id replaced by a new one that keeps its
    12-hex time prefix (so the order stays) and gets a random 14-character tail; references follow."""
    renamed: dict[str, str] = {}

    def rename(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: rename(item) for key, item in value.items()}
        if isinstance(value, list):
            return [rename(item) for item in value]
        if isinstance(value, str) and NATIVE_ID.fullmatch(value):
            if value not in renamed:
                renamed[value] = value[:16] + "".join(secrets.choice(BASE62) for _ in range(14))
            return renamed[value]
        return value

    return dict(rename(document))


def read_session_from_db(
    db_path: Path, session_id: str, cursor: dict[str, Any] | None
) -> tuple[list[NeutralSession], dict[str, Any]]:
    """What is new in one Kilo session (and its children) since `cursor` (`sync kilo --session ID`)."""
    sessions, next_cursor = opencode.read_session_from_db(db_path, session_id, cursor)
    return as_kilo(sessions), next_cursor


class KiloAdapter(Adapter):
    name = NAME
    display_name = DISPLAY_NAME

    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        return as_kilo(opencode.OpenCodeAdapter().read(paths))

    def read_incremental(
        self, path: Path, cursor: dict[str, Any] | None
    ) -> tuple[list[NeutralSession], dict[str, Any]]:
        sessions, next_cursor = opencode.OpenCodeAdapter().read_incremental(path, cursor)
        return as_kilo(sessions), next_cursor

    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        report = MappingReport(agent=NAME, direction="write")
        document = render(as_opencode(session), options, report)
        if options.extra.get(FRESH_IDS):
            report.transform("session, message and part ids → fresh ones (kilo import skips ids it holds)")
            document = fresh_ids(document)
        session_id = document["info"]["id"]
        target = Path(out_dir) / f"{session_id}.json"
        atomic_write(target, json.dumps(document, ensure_ascii=False, indent=2) + "\n", within=Path(out_dir))
        cwd = str(options.cwd or session.meta.get("cwd") or ".")
        command = (command_line(["kilo", "import", str(target)], cwd=cwd) + " && "
                   + command_line(["kilo", "--session", session_id]))
        return WrittenSession(session_id, [target], report, command)

    def install_dir(self, cwd: Path, env: Mapping[str, str]) -> Path:
        """Kilo keeps sessions in its database; import files wait here for `kilo import`."""
        return default_db_path(env).parent / "mcp-memory-import"

    def install(
        self, session: NeutralSession, *, cwd: Path, env: Mapping[str, str], options: WriteOptions
    ) -> WrittenSession:
        from .install import configured_model

        extra = {**options.extra, FRESH_IDS: True}
        if "opencode_model" not in extra:  # resume with the model this user's Kilo is set up for
            model = configured_model(Path(cwd), env)
            if model:
                extra["opencode_model"] = model
        written = self.write(session, self.install_dir(cwd, env),
                             WriteOptions(thinking=options.thinking, cwd=options.cwd or cwd, extra=extra))
        binary = shutil.which("kilo", path=env.get("PATH"))
        if binary is None:
            written.report.note("kilo is not on PATH: run resume_command to import the session")
            return written
        result = subprocess.run([binary, "import", str(written.files[0])], cwd=cwd, env=dict(env),
                                capture_output=True, text=True, timeout=120, check=False)
        match = IMPORTED.search(result.stdout + result.stderr)
        if result.returncode != 0 or match is None:
            output = (result.stderr or result.stdout).strip()[-500:]
            raise RuntimeError(f"kilo import failed (exit {result.returncode}): {output}")
        written.native_id = match.group(1)
        written.resume_command = command_line(["kilo", "--session", written.native_id], cwd=str(cwd))
        return written
