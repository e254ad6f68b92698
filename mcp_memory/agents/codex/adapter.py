"""Codex CLI adapter: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl` ⇄ neutral sessions.

Format facts: README.md in this package (from openai/codex `codex-rs/protocol`, `rollout/recorder.rs`;
CODEX_HOME defaults to ~/.codex, file dates in local time) and tests/fixtures/real/codex (rollouts of
Codex CLI 0.169.0, resumed offline). Checked against Codex CLI 0.169.0: a rollout written here is listed
by its app server (`thread/list`, the listing behind `codex resume`) and opened by `thread/read`
(tests/interop/test_codex_interop.py). Parsing lives in read.py, rendering in write.py.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...files import atomic_write as write_atomic
from ...shell import command_line
from ..base import Adapter, FormatError, MappingReport, NeutralSession, WriteOptions, WrittenSession
from . import DISPLAY_NAME, NAME
from .incremental import read_incremental, without_trailing
from .read import AGENT, RolloutState, parse_rollout
from .scaffold import CONTEXT_PREFIXES
from .write import RolloutWriter, dump_lines, rollout_name, session_uuid, start_time


def codex_home(env: Mapping[str, str]) -> Path:
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    return Path(env.get("HOME") or Path.home()) / ".codex"


def configured_model(env: Mapping[str, str]) -> dict[str, str]:
    """`model_provider` and `model` from `$CODEX_HOME/config.toml`, as write options; Codex's own
    default provider is `openai` when the file names none."""
    path = codex_home(env) / "config.toml"
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"model_provider": "openai"}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FormatError(f"cannot read the Codex config {path}: {exc}") from None
    found = {"model_provider": str(document.get("model_provider") or "openai")}
    if isinstance(document.get("model"), str):
        found["model"] = document["model"]
    return found


def rollout_files(paths: Sequence[Path]) -> list[Path]:
    """Files named, folders searched recursively for `*.jsonl` rollouts."""
    found: dict[Path, None] = {}
    for path in map(Path, paths):
        if path.is_dir():
            found.update(dict.fromkeys(sorted(path.rglob("*.jsonl"))))
        else:
            found[path] = None
    return list(found)


def decode_lines(path: Path, report: MappingReport) -> list[Any]:
    lines = []
    with path.open(encoding="utf-8", errors="replace") as handle:
        for raw in handle:
            if not raw.strip():
                continue
            try:
                lines.append(json.loads(raw))
            except ValueError:
                report.drop("undecodable JSON line")
    return lines


def fallback_id(path: Path) -> str:
    """The uuid at the end of `rollout-<time>-<uuid>.jsonl`, else the file stem."""
    stem = path.stem
    return stem[-36:] if stem.startswith("rollout-") and len(stem) > 36 else stem


def session_meta(state: RolloutState) -> dict[str, Any]:
    raw = state.meta
    meta: dict[str, Any] = {"agent_source": AGENT}
    title = first_prompt(state)
    facts = {
        "title": title,
        "cwd": state.cwd if raw.get("cwd") is None else raw.get("cwd"),
        "model": state.model,
        "created_at": raw.get("timestamp"),
        "cli_version": raw.get("cli_version"),
        "originator": raw.get("originator"),
        "source": raw.get("source"),
        "model_provider": raw.get("model_provider"),
        "forked_from_id": raw.get("forked_from_id"),
        "git": raw.get("git"),
    }
    meta.update({key: value for key, value in facts.items() if value is not None})
    native: dict[str, Any] = {"format": "legacy" if state.legacy else "rollout"}
    if state.header_line is not None:
        native["session_meta_line"] = state.header_line
    if state.pending:
        native["trailing"] = state.pending
    meta["native"] = native
    return meta


def first_prompt(state: RolloutState) -> str | None:
    """Codex titles a thread with its first real user prompt (not the injected context)."""
    for message in state.messages:
        if message.role == "user" and isinstance(message.content, str) and not message.metadata.get("scaffold"):
            text = message.content.strip()
            if text and not text.startswith(CONTEXT_PREFIXES):
                return text[:200]
    return None


class CodexAdapter(Adapter):
    name = NAME
    display_name = DISPLAY_NAME

    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        return [self.read_file(path) for path in rollout_files(paths)]

    def read_file(self, path: Path) -> NeutralSession:
        report = MappingReport(agent=AGENT, direction="read")
        state = parse_rollout(decode_lines(path, report), report, fallback_id(path))
        return self._session(path, state)

    def read_incremental(
        self, path: Path, cursor: dict[str, Any] | None
    ) -> tuple[list[NeutralSession], dict[str, Any]]:
        """Only the lines after the cursor (incremental.py); the same append_ids as a full read."""
        path = Path(path)
        state, new_cursor = read_incremental(path, cursor, fallback_id(path))
        session = without_trailing(self._session(path, state))
        return [session], new_cursor

    def _session(self, path: Path, state: RolloutState) -> NeutralSession:
        report = state.report
        if state.pending:
            report.note("lines after the last message are kept in session.meta.native.trailing")
        meta = session_meta(state)
        forked = meta.get("forked_from_id")
        return NeutralSession(
            agent=AGENT,
            native_id=state.session_id,
            messages=state.messages,
            meta=meta,
            report=report,
            parent_native_id=str(forked) if forked else None,
            source_path=path,
        )

    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        report = MappingReport(agent=AGENT, direction="write")
        start = start_time(session)
        thread_id = session_uuid(session, start)
        writer = RolloutWriter(session, options, report, thread_id, start)
        lines = writer.render()
        target = Path(out_dir) / rollout_name(start, thread_id)
        write_atomic(target, dump_lines(lines), within=Path(out_dir))
        cwd = options.cwd or session.meta.get("cwd")
        command = command_line(["codex", "resume", thread_id], cwd=str(cwd) if cwd else None)
        return WrittenSession(native_id=thread_id, files=[target], report=report, resume_command=command)

    def install_dir(self, cwd: Path, env: Mapping[str, str]) -> Path | None:
        return codex_home(env) / "sessions"

    def install(
        self, session: NeutralSession, *, cwd: Path, env: Mapping[str, str], options: WriteOptions
    ) -> WrittenSession:
        target = codex_home(env) / "sessions"
        extra = {**configured_model(env), **options.extra}  # Codex resumes only its own provider's sessions
        options = WriteOptions(thinking=options.thinking, cwd=options.cwd or Path(cwd), extra=extra)
        return self.write(session, target, options)

