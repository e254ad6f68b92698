"""Claude Code adapter: `~/.claude/projects/<encoded cwd>/<session uuid>.jsonl` ⇄ neutral sessions.

Format facts: README.md in this package (§Records, §Resumable files), checked against the files
Claude Code 2.1.328 wrote in tests/fixtures/real/claude-code (resume picker checked offline; see
tests/fixtures/README.md). Parsing lives in read.py, rendering in write.py; this module finds files,
assembles sessions and sub-agents, and reads incrementally for the capture hooks (Stop, SubagentStop,
PreCompact, SessionEnd).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...files import atomic_write as write_text
from ...shell import command_line
from ..base import Adapter, FormatError, MappingReport, NeutralSession, WriteOptions, WrittenSession
from . import DISPLAY_NAME
from .read import AGENT, MessageBuilder, ReadState
from .transcript import Line, consumed_offset, parse_lines
from .write import TranscriptWriter
from .write_support import is_uuid, session_uuid

TITLE_RANK = {"custom-title": 3, "ai-title": 2, "summary": 1}
CURSOR_VERSION = 1


AGENT_ID = re.compile(r"[0-9a-z]{1,40}")  # a sub-agent id as Claude Code writes them: agent-<hex>


def encode_project(cwd: Path | str) -> str:
    """Claude Code's folder name for a project: every non-alphanumeric character becomes '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def transcript_from_hook(payload: Mapping[str, Any]) -> Path:
    """The transcript a capture hook should sync: a sub-agent's own file for SubagentStop."""
    event = payload.get("hook_event_name")
    if event == "SubagentStop" and payload.get("agent_transcript_path"):
        return Path(str(payload["agent_transcript_path"])).expanduser()
    path = payload.get("transcript_path")
    if not path:
        raise FormatError(f"hook payload of {event or 'an unknown event'} has no transcript_path")
    return Path(str(path)).expanduser()


def is_subagent_file(path: Path) -> bool:
    return path.parent.name == "subagents" and path.name.startswith("agent-")


def transcript_files(paths: Sequence[Path]) -> list[Path]:
    """Files named, folders searched recursively; a main transcript brings its sub-agent files along."""
    found: dict[Path, None] = {}
    for path in paths:
        path = Path(path)
        if path.is_dir():
            for file in sorted(path.rglob("*.jsonl")):
                found[file] = None
            continue
        found[path] = None
        companion = path.with_suffix("") / "subagents"
        if companion.is_dir():
            for file in sorted(companion.glob("agent-*.jsonl")):
                found[file] = None
    return list(found)


class ClaudeCodeAdapter(Adapter):
    name = AGENT
    display_name = DISPLAY_NAME

    # -- read ----------------------------------------------------------------------------------

    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        sessions: list[NeutralSession] = []
        for path in transcript_files(paths):
            report = MappingReport(self.name, "read")
            lines = parse_lines(path.read_bytes(), 0, report, complete_only=False)
            sessions.extend(self._sessions(path, lines, report, ReadState(), {}))
        _link_agents(sessions)
        return sorted(sessions, key=lambda s: s.parent_native_id is not None)  # parents first, stable

    def read_incremental(
        self, path: Path, cursor: dict[str, Any] | None
    ) -> tuple[list[NeutralSession], dict[str, Any]]:
        """Reads only the bytes after the cursor's offset (plus the records after the last message,
        which belong to the next message). The cursor keeps the offset, the uuid the chain continues
        from, the last assistant message.id, tool calls awaiting results and the session meta."""
        path = Path(path)
        size = path.stat().st_size
        if not cursor or cursor.get("v") != CURSOR_VERSION or cursor.get("offset", 0) > size:
            cursor = {"v": CURSOR_VERSION, "offset": 0, "state": {}, "meta": {}}
        offset = int(cursor["offset"])
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
        report = MappingReport(self.name, "read")
        lines = parse_lines(data, offset, report, complete_only=True)
        state = ReadState.from_dict(cursor["state"])
        meta = dict(cursor["meta"])
        sessions = self._sessions(path, lines, report, state, meta)
        next_offset = _next_offset(lines, sessions, offset, consumed_offset(data, offset))
        persisted = {k: v for k, v in meta.items() if k != "native"}
        new_cursor = {"v": CURSOR_VERSION, "offset": next_offset, "state": state.to_dict(), "meta": persisted,
                      "bytes_read": len(data)}  # fmt: skip
        return sessions, new_cursor

    def _sessions(
        self, path: Path, lines: list[Line], report: MappingReport, state: ReadState, meta: dict[str, Any]
    ) -> list[NeutralSession]:
        subagent = is_subagent_file(path)
        main = lines if subagent else [ln for ln in lines if not ln.record.get("isSidechain")]
        scan_meta(meta, [ln.record for ln in main])
        session_id = _session_id(path, main, meta)
        builder = MessageBuilder(report, state)
        tail = builder.run(main)
        meta.update({"agent_source": AGENT, "native": {"file": path.name, "tail": tail}})
        if not subagent and not meta.get("title"):  # `claude -p` writes no title record: its picker shows the first prompt
            prompt = first_prompt(builder.messages)
            if prompt:
                meta["title"] = prompt
        session = NeutralSession(self.name, session_id, builder.messages, meta, report, source_path=path)
        if subagent:
            _as_subagent(session, path, main)
            return [session]
        side = [ln for ln in lines if ln.record.get("isSidechain")]
        return [session, *_inline_sidechains(session, side, lines)]

    # -- write ---------------------------------------------------------------------------------

    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        report = MappingReport(self.name, "write")
        native = session.meta.get("native") or {}
        wanted = options.extra.get("session_id")
        if session.parent_native_id is not None:
            return self._write_subagent(session, Path(out_dir), options, report)
        session_id = (
            str(wanted) if wanted and is_uuid(str(wanted)) else session_uuid(session.agent, session.native_id)
        )
        writer = TranscriptWriter(session, session_id, options, report)
        writer.write_messages(session.messages)
        if session.agent == AGENT:
            writer.write_tail(native.get("tail") or [])
        writer.finish(session.meta.get("title"))
        path = Path(out_dir) / f"{session_id}.jsonl"
        write_jsonl(path, writer.lines, within=Path(out_dir))
        cwd = writer.cwd or str(out_dir)
        command = command_line(["claude", "--resume", session_id], cwd=cwd)
        return WrittenSession(session_id, [path], report, resume_command=command)

    def _write_subagent(
        self, session: NeutralSession, out_dir: Path, options: WriteOptions, report: MappingReport
    ) -> WrittenSession:
        native = session.meta.get("native") or {}
        parent_id = session_uuid(session.agent, str(session.parent_native_id).split(":agent-")[0])
        agent_id = str(native.get("agent_id") or "")
        if not AGENT_ID.fullmatch(agent_id):  # meta is data: only Claude's own id shape names a file
            agent_id = session_uuid(session.agent, session.native_id).replace("-", "")[:17]
        session.meta.setdefault("native", {})["agent_id"] = agent_id
        writer = TranscriptWriter(session, parent_id, options, report)
        writer.write_messages(session.messages)
        if session.agent == AGENT:
            writer.write_tail(native.get("tail") or [])
        folder = out_dir / parent_id / "subagents"
        path = folder / f"agent-{agent_id}.jsonl"
        write_jsonl(path, writer.lines, within=out_dir)
        sidecar = dict(native.get("agent_meta") or {"agentType": "general-purpose"})
        if session.parent_tool_call_id:
            sidecar["toolUseId"] = session.parent_tool_call_id
        meta_path = folder / f"agent-{agent_id}.meta.json"
        write_text(meta_path, json.dumps(sidecar, ensure_ascii=False), within=out_dir)
        return WrittenSession(f"{parent_id}:agent-{agent_id}", [path, meta_path], report)

    def install_dir(self, cwd: Path, env: Mapping[str, str]) -> Path | None:
        config = env.get("CLAUDE_CONFIG_DIR")
        root = Path(config) if config else Path(env["HOME"]) / ".claude"
        name = encode_project(cwd)
        if config and env.get("CLAUDE_CODE_PROJECT_DIR_NAME"):
            name = env["CLAUDE_CODE_PROJECT_DIR_NAME"]
        elif len(name) > 200:
            raise FormatError(
                "the project path is too long for Claude Code's folder naming (over 200 characters); "
                "use --out and `claude --resume <id>`, which searches every project"
            )
        return root / "projects" / name

    def install(
        self, session: NeutralSession, *, cwd: Path, env: Mapping[str, str], options: WriteOptions
    ) -> WrittenSession:
        return super().install(session, cwd=cwd, env=env, options=replace(options, cwd=Path(cwd)))


# -- session assembly ---------------------------------------------------------------------------------


def scan_meta(meta: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """Session meta from the records: first cwd/time/model, best title (custom > ai > summary)."""
    for record in records:
        kind = record.get("type")
        for key, field in (("cwd", "cwd"), ("created_at", "timestamp"), ("git_branch", "gitBranch")):
            if key not in meta and isinstance(record.get(field), str):
                meta[key] = record[field]
        if record.get("sessionId") and "session_id" not in meta:
            meta["session_id"] = record["sessionId"]
        if isinstance(record.get("version"), str):
            meta["version"] = record["version"]
        model = (record.get("message") or {}).get("model") if kind == "assistant" else None
        if model and model != "<synthetic>" and "model" not in meta:
            meta["model"] = model
        title = record.get("customTitle") or record.get("aiTitle") or record.get("summary")
        rank = TITLE_RANK.get(str(kind), 0)
        if isinstance(title, str) and rank >= meta.get("title_rank", 0):
            meta["title"], meta["title_rank"] = title, rank


def first_prompt(messages: list[Any], limit: int = 80) -> str | None:
    """The first user text, cut at `limit` characters (as the writer titles a session)."""
    for message in messages:
        if message.role == "user" and isinstance(message.content, str) and message.content.strip():
            return message.content[:limit].strip()
    return None


def _session_id(path: Path, lines: list[Line], meta: dict[str, Any]) -> str:
    if is_subagent_file(path):
        agent = path.stem.removeprefix("agent-")
        parent = meta.get("session_id") or path.parent.parent.name
        return f"{parent}:agent-{agent}"
    return path.stem if is_uuid(path.stem) else str(meta.get("session_id") or path.stem)


def _as_subagent(session: NeutralSession, path: Path, lines: list[Line]) -> None:
    parent_id, _, agent = session.native_id.partition(":agent-")
    session.parent_native_id = parent_id
    session.meta["native"]["agent_id"] = agent
    sidecar = path.with_name(path.stem + ".meta.json")
    if sidecar.is_file():
        try:
            data = json.loads(sidecar.read_text(encoding="utf-8"))
        except ValueError:
            data = None
        if isinstance(data, dict):
            session.meta["native"]["agent_meta"] = data
            session.parent_tool_call_id = data.get("toolUseId")
            session.meta.setdefault("title", data.get("description"))


def _inline_sidechains(parent: NeutralSession, side: list[Line], lines: list[Line]) -> list[NeutralSession]:
    """Old versions (≤2.0.x) keep sub-agent lines in the main file with isSidechain: one child each."""
    groups: dict[str, list[Line]] = {}
    by_uuid = {ln.uuid: ln for ln in side if ln.uuid}
    for line in side:
        groups.setdefault(str(line.record.get("agentId") or _root(line, by_uuid)), []).append(line)
    calls = _agent_calls(lines)
    children = []
    for agent, group in groups.items():
        report = MappingReport(AGENT, "read")
        meta: dict[str, Any] = {}
        scan_meta(meta, [ln.record for ln in group])
        builder = MessageBuilder(report, ReadState())
        tail = builder.run(group)
        meta.update({"agent_source": AGENT, "native": {"agent_id": agent, "tail": tail, "inline": True}})
        child = NeutralSession(AGENT, f"{parent.native_id}:agent-{agent}", builder.messages, meta, report,
                               parent_native_id=parent.native_id, source_path=parent.source_path)  # fmt: skip
        child.parent_tool_call_id = calls.get(agent) or _call_before(lines, group[0])
        children.append(child)
    return children


def _root(line: Line, by_uuid: dict[str, Line]) -> str:
    seen: set[str | None] = set()
    current = line
    while isinstance(parent := current.record.get("parentUuid"), str) and parent in by_uuid \
            and current.uuid not in seen:
        seen.add(current.uuid)
        current = by_uuid[parent]
    return str(current.uuid)[:8]


def _agent_calls(lines: list[Line]) -> dict[str, str]:
    """agentId → the tool_use id whose result came back from that sub-agent."""
    calls: dict[str, str] = {}
    for line in lines:
        result = line.record.get("toolUseResult")
        agent = line.record.get("agentId") if not line.record.get("isSidechain") else None
        agent = (result.get("agentId") if isinstance(result, dict) else None) or agent
        content = (line.record.get("message") or {}).get("content")
        if agent and isinstance(content, list):
            ids = [
                b.get("tool_use_id")
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
            if ids:
                calls[str(agent)] = str(ids[0])
    return calls


def _call_before(lines: list[Line], first: Line) -> str | None:
    """Fallback: the last Task/Agent call in the main chain written before the sidechain started."""
    found = None
    for line in lines:
        if line is first:
            break
        if line.type == "assistant" and not line.record.get("isSidechain"):
            for block in (line.record.get("message") or {}).get("content") or []:
                if (
                    isinstance(block, dict)
                    and block.get("type") == "tool_use"
                    and block.get("name") in ("Task", "Agent")
                ):
                    found = str(block.get("id"))
    return found


def _link_agents(sessions: list[NeutralSession]) -> None:
    """Sub-agent files without a sidecar: find the spawning call through the parent's tool results."""
    for child in sessions:
        if child.parent_native_id is None or child.parent_tool_call_id:
            continue
        agent = (child.meta.get("native") or {}).get("agent_id")
        for parent in sessions:
            if parent.native_id != child.parent_native_id:
                continue
            for message in parent.messages:
                lines = (message.metadata.get("native") or {}).get("lines") or []
                calls = _agent_calls([Line(record, 0, 0) for record in lines])
                if agent in calls:
                    child.parent_tool_call_id = calls[agent]


def _next_offset(lines: list[Line], sessions: list[NeutralSession], start: int, consumed: int) -> int:
    """Resume after the last line that formed a message; records after it are read again next time."""
    if not lines:
        return start
    last_uuid = None
    for session in sessions[:1]:
        for message in reversed(session.messages):
            native = message.metadata.get("native") or {}
            if native.get("lines"):
                last_uuid = native["lines"][-1].get("uuid")
                break
    for line in reversed(lines):
        if last_uuid is not None and line.uuid == last_uuid:
            return line.end
    return start if last_uuid is None else consumed


# -- files ------------------------------------------------------------------------------------------


def write_jsonl(path: Path, records: list[dict[str, Any]], *, within: Path) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    write_text(path, text, within=within)
