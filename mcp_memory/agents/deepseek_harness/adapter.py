"""DeepSeek Harness (`dsh`, deepseek-ai/deepseek-harness): the append-only session event log.

Format facts (README.md in this package; deepseek-harness at b150a551, release 0.1.1-rc.2:
`packages/session/session-persistence-jsonl` README and src/format.ts, `packages/core/session`,
`docs/subsystems/session.md`, `packages/llm/llm/src/message.ts`):
- `$DSH_HOME/sessions/--<projectKey(cwd)>--/<encodeSegment(id)>/session.jsonl.zstd` (default; a
  concatenation of independent zstd frames) or `session.jsonl` for a root with `compression: none`.
- Line 1 is the header `{"type":"session","version":0,"id","createdAt"(epoch ms),"cwd",…}`; every
  later line is an event `{"type","seq","time","data","surfaceOp"?,"sourceEventSeqs"?}` or a packed
  chunk row (`text-chunks` / `reasoning-chunks` / `tool-call-chunks`, with `seq0`, `time0`, `dt[]`).
- The model-visible history is folded from `user/message`, `assistant/message` and `tool/result`.
  Messages hold blocks: text, reasoning, image, tool-call `{id,name,arguments}`, and tool-result
  `{toolCallId,content,isError}`; tool results are user-side messages with `source.kind = "tool"`;
  injected context is a user message with `source.kind = "plugin"` (→ neutral `system`).
- Resume: `dsh --profile tui --resume <id>` (apps/cli README; the tui app owns `--resume`).

Every native line is kept: the lines that lead up to a message travel in that message's
`metadata.native.events`, so a same-agent round trip re-emits the log line for line.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import zstandard

from ...files import inside
from ...schema import MessageIn
from ...shell import command_line
from ..base import Adapter, FormatError, MappingReport, NeutralSession, WriteOptions, WrittenSession, stable_id
from ..openai_chat.adapter import json_arguments
from . import DISPLAY_NAME, NAME

MESSAGE_EVENTS = ("user/message", "assistant/message", "tool/result")


class DeepSeekHarnessAdapter(Adapter):
    name = NAME
    display_name = DISPLAY_NAME

    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        return [read_log(path) for path in _log_files(paths)]

    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        from .write import render_log

        report = MappingReport(agent=NAME, direction="write")
        header, lines = render_log(session, options=options, report=report)
        native_id = header["id"]
        compressed = options.extra.get("compression", "zstd") != "none"
        target = (
            out_dir / encode_segment(native_id) / ("session.jsonl.zstd" if compressed else "session.jsonl")
        )
        inside(out_dir, target)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_log(target, header, lines)
        return WrittenSession(
            native_id=native_id,
            files=[target],
            report=report,
            resume_command=command_line(["dsh", "--profile", "tui", "--resume", native_id]),
        )

    def install_dir(self, cwd: Path, env: Mapping[str, str]) -> Path | None:
        home = env.get("DSH_HOME") or (str(Path(env["HOME"]) / ".dsh") if env.get("HOME") else None)
        if home is None:
            raise FormatError("neither DSH_HOME nor HOME is set; cannot find the DeepSeek harness home")
        return Path(home) / "sessions" / project_key(str(cwd))

    def install(
        self, session: NeutralSession, *, cwd: Path, env: Mapping[str, str], options: WriteOptions
    ) -> WrittenSession:
        # The header's cwd must name the project folder the session is installed under.
        pinned = WriteOptions(thinking=options.thinking, cwd=cwd, extra=dict(options.extra))
        return super().install(session, cwd=cwd, env=env, options=pinned)


# --- paths ---------------------------------------------------------------------------------------


def _escape(text: str) -> str:
    return "".join(
        ch if re.fullmatch(r"[A-Za-z0-9._-]", ch) else "".join(f"~{unit:04X}" for unit in _utf16(ch))
        for ch in text
    )


def _utf16(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def project_key(cwd: str | None) -> str:
    """`--<cwd>--`: separators → `-` (runs collapse), other unsafe chars → `~` + four hex digits, 251 chars max."""
    if not cwd:
        return "_no-cwd"
    dashed = re.sub(r"[/\\:]+", "-", cwd)
    return f"--{_escape(dashed).lstrip('-')[:251]}--"


def encode_segment(session_id: str) -> str:
    return _escape(session_id).replace(".", "~002E")


def _log_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        for pattern in ("session.jsonl", "session.jsonl.zstd", "*.session.jsonl"):
            files.extend(candidate for candidate in sorted(path.rglob(pattern)) if candidate not in files)
    return files


# --- file I/O ------------------------------------------------------------------------------------


# A compressed log inflates at most MAX_INFLATE_RATIO times its size (dsh's logs: about 10:1), and
# never past MAX_INFLATED_BYTES; small files may always reach INFLATE_FLOOR. A crafted 98 KB file that
# would inflate to 3 GiB is refused after INFLATE_FLOOR bytes instead of filling the memory.
MAX_INFLATE_RATIO = 100
INFLATE_FLOOR = 64 * 1024 * 1024
MAX_INFLATED_BYTES = 1024 * 1024 * 1024
MAX_WINDOW_BYTES = 32 * 1024 * 1024  # zstd's window at dsh's level is a few MiB; a frame may ask for more
_CHUNK = 1024 * 1024


def read_lines(path: Path) -> list[str]:
    raw = path.read_bytes()
    text = inflate(raw, path=path) if path.suffix in (".zstd", ".zst") else raw
    return [line for line in text.decode("utf-8").splitlines() if line.strip()]


def inflate(raw: bytes, *, path: Path, ratio: int = MAX_INFLATE_RATIO, floor: int = INFLATE_FLOOR,
            ceiling: int = MAX_INFLATED_BYTES) -> bytearray:
    """The zstd frames of `raw`, decompressed a chunk at a time and refused (FormatError) as soon as
    the output passes `ratio` times the input (at least `floor`, at most `ceiling` bytes)."""
    allowed = min(ceiling, max(floor, ratio * len(raw)))
    decompressor = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW_BYTES)
    reader = decompressor.stream_reader(io.BytesIO(raw), read_across_frames=True)
    out = bytearray()
    try:
        while chunk := reader.read(_CHUNK):
            out += chunk
            if len(out) > allowed:
                raise FormatError(
                    f"{path}: decompresses to more than {allowed} bytes from {len(raw)} (the limit is "
                    f"{ratio} times the compressed size, at least {floor} and at most {ceiling} bytes): "
                    "refused as a decompression bomb")
    except zstandard.ZstdError as exc:
        raise FormatError(f"{path}: not a readable zstd file ({exc})") from None
    return out


def write_log(target: Path, header: dict[str, Any], lines: list[dict[str, Any]]) -> None:
    head = (json.dumps(header, ensure_ascii=False) + "\n").encode()
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
    if target.suffix == ".zstd":  # one frame for the header, one for the batch, as dsh appends them
        compressor = zstandard.ZstdCompressor(write_checksum=True)
        data = compressor.compress(head) + (compressor.compress(body) if body else b"")
    else:
        data = head + body
    target.write_bytes(data)


# --- reading -------------------------------------------------------------------------------------


def read_log(path: Path) -> NeutralSession:
    report = MappingReport(agent=NAME, direction="read")
    lines = read_lines(path)
    header = json.loads(lines[0]) if lines else {}
    if header.get("type") != "session":
        raise FormatError(f"{path} is not a DeepSeek harness session log (no session header)")
    if header.get("version") != 0:
        report.note(f"session format version {header.get('version')!r}; this reader knows version 0")
    session_id = str(header.get("id"))
    state = _ReadState(session_id=session_id, fallback_ms=header.get("createdAt") or None, report=report)
    for number, line in enumerate(lines[1:], start=2):
        try:
            event = json.loads(line)
        except ValueError:
            report.drop(f"unparseable line (line {number})")
            continue
        state.feed(event)
    if state.pending and state.messages:
        state.messages[-1].metadata["native"]["after"] = state.pending
    elif state.pending:
        report.transform("events without any message (kept under meta.native)", len(state.pending))
    meta = {
        "agent_source": NAME,
        "cwd": header.get("cwd"),
        "title": state.title,
        "model": state.model,
        "created_at": _rfc3339(header.get("createdAt")),
        "native": {"header": header, "events": [] if state.messages else state.pending},
    }
    return NeutralSession(
        agent=NAME,
        native_id=session_id,
        messages=state.messages,
        meta={key: value for key, value in meta.items() if value is not None},
        report=report,
        parent_native_id=header.get("parentSession"),
        source_path=path,
    )


class _ReadState:
    """Folds events into neutral messages, attaching every line to the message it leads up to."""

    def __init__(self, *, session_id: str, fallback_ms: int | None, report: MappingReport) -> None:
        self.session_id = session_id
        self.fallback_ms = fallback_ms
        self.report = report
        self.messages: list[MessageIn] = []
        self.pending: list[dict[str, Any]] = []
        self.title: str | None = None
        self.model: str | None = None

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        self.pending.append(event)
        data = event.get("data") or {}
        if kind == "session/title" and isinstance(data.get("title"), str):
            self.title = data["title"]
        if kind not in MESSAGE_EVENTS:
            self.report.transform(f"event {kind} (kept under metadata.native)")
            return
        if isinstance(event.get("surfaceOp"), dict):
            self.report.transform("compaction surface op (message kept; the op is under metadata.native)")
        message = data.get("message") if kind != "user/message" else data
        new = self._convert(kind, message or {}, time_ms=event.get("time") or self.fallback_ms, extra=data)
        if not new:
            return
        if not event.get("time") and self.fallback_ms:
            self.report.synthesize("created_at from the session header (event line has no time)", len(new))
        new[0].metadata["native"] = {"events": self.pending}
        for other in new[1:]:
            other.metadata["native"] = {"events": []}
        self.pending = []
        self.messages.extend(new)

    def _convert(
        self, kind: str, message: dict[str, Any], *, time_ms: Any, extra: dict[str, Any]
    ) -> list[MessageIn]:
        blocks = [block for block in message.get("content") or [] if isinstance(block, dict)]
        key = message.get("id") or stable_id(kind, json.dumps(message, sort_keys=True))
        metadata: dict[str, Any] = {"agent_source": NAME}
        base: dict[str, Any] = {"created_at": _datetime(time_ms), "metadata": metadata}
        if kind == "tool/result":
            return [
                self._tool_result(block, key, index, base)
                for index, block in enumerate(blocks)
                if block.get("type") == "tool-result"
            ]
        source = message.get("source") or {}
        content, thinking, calls = blocks_to_fields(blocks, self.report)
        if kind == "assistant/message":
            self.model = source.get("model") or self.model
            if content is None and not thinking and not calls:
                self.report.drop("empty assistant message (dsh skips it in the derived history too)")
                return []
            metadata.update(model=source.get("model"), provider=source.get("provider"))
            if extra.get("usage"):
                metadata["usage"] = extra["usage"]
        role = "assistant" if kind == "assistant/message" else "user"
        if role == "user" and source.get("kind") == "plugin":
            role = "system"
            self.report.transform("plugin-injected user message (runtime context) → system message")
        fields = {
            "role": role,
            "content": content,
            "tool_calls": calls or None,
            "thinking": {"content": thinking} if thinking else None,
        }
        return [MessageIn.model_validate({**base, **fields, "append_id": self._append_id(key, 0)})]

    def _tool_result(self, block: dict[str, Any], key: str, index: int, base: dict[str, Any]) -> MessageIn:
        content, _, _ = blocks_to_fields(
            [b for b in block.get("content") or [] if isinstance(b, dict)], self.report
        )
        metadata = {**base["metadata"], **({"is_error": True} if block.get("isError") else {})}
        return MessageIn.model_validate(
            {
                **base,
                "metadata": metadata,
                "role": "tool",
                "content": content if content is not None else "",
                "tool_call_id": str(block.get("toolCallId")),
                "append_id": self._append_id(key, index),
            }
        )

    def _append_id(self, key: str, index: int) -> str:
        return stable_id(NAME, self.session_id, key, index, prefix="dsh_")


def blocks_to_fields(
    blocks: list[dict[str, Any]], report: MappingReport
) -> tuple[Any, str | None, list[Any]]:
    """DSH content blocks → (neutral content, reasoning text, OpenAI tool calls)."""
    parts: list[dict[str, Any]] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "reasoning":
            reasoning.append(str(block.get("text", "")))
        elif kind == "tool-call":
            arguments = json_arguments(block.get("arguments"), report)
            calls.append(
                {
                    "id": str(block.get("id")),
                    "function": {"name": str(block.get("name")), "arguments": arguments},
                }
            )
        elif isinstance(kind, str) and kind:
            report.transform(f"content block {kind} → content part of the same type")
            parts.append(dict(block))
    content: str | list[dict[str, Any]] | None = parts
    if all(part["type"] == "text" for part in parts):
        content = "\n\n".join(part["text"] for part in parts) if parts else None
    return content, "\n\n".join(reasoning) or None, calls


def _datetime(epoch_ms: Any) -> datetime | None:
    if isinstance(epoch_ms, int | float) and epoch_ms > 0:
        return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return None


def _rfc3339(epoch_ms: Any) -> str | None:
    moment = _datetime(epoch_ms)
    return moment.isoformat().replace("+00:00", "Z") if moment else None
