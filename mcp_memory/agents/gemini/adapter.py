"""Gemini CLI adapter: `~/.gemini/tmp/<project>/chats/session-*.jsonl` (and legacy `.json`) ⇄ neutral.

Format facts: README.md in this package and tests/fixtures/real/gemini (Gemini CLI 0.61.0).
Project folders, from the 0.61.0 bundle (`ProjectRegistry`, `Storage.performMigration`): `<project>` is
the slug that `~/.gemini/projects.json` maps the project root to (owner written in
`tmp/<slug>/.project_root`); a folder named `sha256(project root)` is the pre-2026 layout, which Gemini
copies to the slug folder on start when that folder holds nothing yet. `GEMINI_CLI_HOME` replaces HOME.
Gemini deletes chats whose `lastUpdated` is older than 30 days on start (`general.sessionRetention`),
so `install` stamps `lastUpdated` with the current time. Checked against Gemini CLI 0.61.0
(`--list-sessions`, tests/interop/test_gemini_interop.py). Parsing lives in read.py, rendering in
write.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...files import atomic_write as write_atomic
from ...shell import command_line
from ..base import Adapter, MappingReport, NeutralSession, WriteOptions, WrittenSession
from . import DISPLAY_NAME, NAME
from .incremental import read_since
from .marks import is_hook_part, is_prompt, split_hook_context, text_of
from .read import AGENT, ChatState, RecordMapper, load_legacy, replay_lines
from .write import ChatWriter, chat_file_name, last_time, project_hash, session_uuid, start_time


def gemini_dir(env: Mapping[str, str]) -> Path:
    home = env.get("GEMINI_CLI_HOME") or env.get("HOME") or str(Path.home())
    return Path(home) / ".gemini"


def project_folder(cwd: Path, env: Mapping[str, str]) -> Path:
    """The `tmp/<project>` folder Gemini uses for `cwd`: registered slug, marker owner, else the hash."""
    tmp = gemini_dir(env) / "tmp"
    root = str(cwd)
    try:
        registry = json.loads((gemini_dir(env) / "projects.json").read_text(encoding="utf-8"))
        slug = registry.get("projects", {}).get(root)
    except (OSError, ValueError, AttributeError):
        slug = None
    if isinstance(slug, str) and slug and _owner(tmp / slug) in (None, root):
        return tmp / slug
    if tmp.is_dir():
        for folder in sorted(tmp.iterdir()):
            if _owner(folder) == root:
                return folder
    return tmp / project_hash(root)


def _owner(folder: Path) -> str | None:
    try:
        return (folder / ".project_root").read_text(encoding="utf-8").strip()
    except OSError:
        return None


def chat_files(paths: Sequence[Path]) -> list[Path]:
    """Files named; folders searched recursively for `session-*.json` / `session-*.jsonl`."""
    found: dict[Path, None] = {}
    for path in map(Path, paths):
        if path.is_dir():
            files = [*path.rglob("*session-*.jsonl"), *path.rglob("*session-*.json")]
            found.update(dict.fromkeys(sorted(files)))
        else:
            found[path] = None
    return list(found)


def load_state(path: Path, report: MappingReport) -> ChatState:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".json":
        try:
            return load_legacy(json.loads(text), report)
        except ValueError:
            report.drop("legacy chat file that is not valid JSON")
            return ChatState(report=report)
    lines = []
    for raw in text.splitlines():
        if raw.strip():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                report.drop("undecodable JSON line")
    return replay_lines(lines, report)


def session_meta(state: ChatState, path: Path, records: list[dict[str, Any]]) -> dict[str, Any]:
    header = state.metadata
    meta: dict[str, Any] = {"agent_source": AGENT}
    facts = {
        "title": header.get("summary") or first_prompt(records),
        "cwd": _owner(path.parent.parent) if path.parent.name == "chats" else None,
        "model": next((r["model"] for r in reversed(records) if isinstance(r.get("model"), str)), None),
        "created_at": header.get("startTime"),
        "project_hash": header.get("projectHash"),
        "kind": header.get("kind"),
    }
    meta.update({key: value for key, value in facts.items() if value is not None})
    meta["native"] = {"header": header}
    return meta


def first_prompt(records: list[dict[str, Any]]) -> str | None:
    for record in records:
        if is_prompt(record):
            content = record.get("content")
            typed = [p for p in (content if isinstance(content, list) else [content]) if not is_hook_part(p)]
            parts = split_hook_context(text_of(typed))
            prompt = (parts[-1]["text"] if isinstance(parts, list) else text_of(typed)).strip()
            if prompt:
                return prompt[:200]
    return None


class GeminiAdapter(Adapter):
    name = NAME
    display_name = DISPLAY_NAME

    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        """One session per sessionId. Gemini CLI 0.61 leaves a stub file (header + setup text) with
        the same sessionId when a session is resumed in a later minute: the fullest file wins and
        the others are named in its report."""
        chosen: dict[str, NeutralSession] = {}
        skipped: dict[str, list[NeutralSession]] = {}
        for session in (self.read_file(path) for path in chat_files(paths)):
            current = chosen.get(session.native_id)
            if current is None:
                chosen[session.native_id] = session
                continue
            keep, drop = (session, current) if len(session.messages) > len(current.messages) else (current, session)
            chosen[session.native_id] = keep
            skipped.setdefault(session.native_id, []).append(drop)
        for native_id, dropped in skipped.items():
            report = chosen[native_id].report
            if report is not None:
                report.drop("chat file with the same sessionId (a resume stub)", len(dropped))
                for stub in dropped:
                    report.note(f"kept the fuller chat file of session {native_id}; skipped {stub.source_path}")
        return list(chosen.values())

    def read_file(self, path: Path) -> NeutralSession:
        report = MappingReport(agent=AGENT, direction="read")
        state = load_state(path, report)
        session_id = str(state.metadata.get("sessionId") or path.stem)
        records = list(state.records.values())
        messages = RecordMapper(session_id, report).map(records)
        if state.metadata.get("kind") == "subagent":
            report.note("subagent chat file (Gemini lists main sessions only)")
        parent = (
            path.parent.name if path.parent.name != "chats" and not path.name.startswith("session-") else None
        )
        return NeutralSession(
            agent=AGENT,
            native_id=session_id,
            messages=messages,
            meta=session_meta(state, path, records),
            report=report,
            parent_native_id=parent,
            source_path=path,
        )

    def read_incremental(
        self, path: Path, cursor: dict[str, Any] | None
    ) -> tuple[list[NeutralSession], dict[str, Any]]:
        """Only the messages new since `cursor` (incremental.py); a legacy `.json` file is read whole."""
        return self.read_since(path, cursor, settled=True)

    def read_since(
        self, path: Path, cursor: dict[str, Any] | None, *, settled: bool
    ) -> tuple[list[NeutralSession], dict[str, Any]]:
        """`read_incremental`, told whether the turn is over (`settled`, see incremental.py)."""
        if Path(path).suffix == ".json":
            return self.read([path]), {}
        return read_since(Path(path), cursor, settled=settled)

    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        report = MappingReport(agent=AGENT, direction="write")
        session_id = session_uuid(session)
        start = start_time(session)
        writer = ChatWriter(session, options, report, session_id)
        records = writer.render()
        header = writer.header(
            start, last_time(session, start), bool(options.extra.get("refresh_last_updated"))
        )
        target = Path(out_dir) / chat_file_name(start, session_id)
        write_atomic(
            target,
            "".join(
                json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
                for line in [header, *records]
            ),
            within=Path(out_dir),
        )
        cwd = options.cwd or session.meta.get("cwd")
        command = command_line(["gemini", "--resume", session_id], cwd=str(cwd) if cwd else None)
        return WrittenSession(native_id=session_id, files=[target], report=report, resume_command=command)

    def install_dir(self, cwd: Path, env: Mapping[str, str]) -> Path | None:
        return project_folder(Path(cwd), env) / "chats"

    def install(
        self, session: NeutralSession, *, cwd: Path, env: Mapping[str, str], options: WriteOptions
    ) -> WrittenSession:
        target = self.install_dir(cwd, env)
        assert target is not None
        extra = {**options.extra, "refresh_last_updated": True}
        return self.write(
            session, target, WriteOptions(thinking=options.thinking, cwd=Path(cwd), extra=extra)
        )

