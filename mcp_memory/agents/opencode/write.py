"""Neutral session → the JSON that `opencode import FILE` accepts (OpenCode 1.x).

Format facts: README.md in this package, §Ids, §Records and §Writing; checked by importing into
OpenCode 1.18.33 (tests/interop/test_opencode_interop.py).

- Messages that carry OpenCode's own record (`metadata["native"]`) are written back verbatim, so a
  same-agent round trip is lossless; tool parts are restored from their tool messages.
- Messages from other agents get minted ids (`msg_`/`prt_` ascending, `ses_` descending, 12 hex of
  `ms·4096 + n` then 14 base62 characters derived from the session) so that ids sort in display
  order and re-writing the same session yields the same ids; every assistant message gets
  `parentID`, `modelID/providerID/mode/agent/path/cost/tokens/time.completed`; every user message
  `agent` + `model`; a tool call and its result become one tool part (`input` object, `output`
  string or `status: "error"`). No snapshot or patch hashes are invented.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...schema import MessageIn, ToolCall
from ..base import MappingReport, NeutralSession, WriteOptions, epoch_ms
from .ids import SESSION_ID, IdMinter
from .read import AGENT
from .write_session import first_time, last_time, native_session, title
from .write_tools import content_part, guess_provider, tokens_from_usage, tool_part

TARGET_VERSION = "1.18.33"
DEFAULT_AGENT = "build"


@dataclass
class _Writer:
    session: NeutralSession
    options: WriteOptions
    report: MappingReport
    ids: IdMinter
    session_id: str = ""
    cwd: str = "/"
    clock: int = 0
    last_user: dict[str, Any] | None = None
    results: dict[str, MessageIn] = field(default_factory=dict)
    consumed: set[str] = field(default_factory=set)
    out: list[dict[str, Any]] = field(default_factory=list)


def render(session: NeutralSession, options: WriteOptions, report: MappingReport) -> dict[str, Any]:
    """The `{info, messages:[{info, parts}]}` document for `opencode import`."""
    writer = _Writer(session, options, report, IdMinter(seed=f"{session.agent}\x1f{session.native_id}"))
    writer.cwd = str(options.cwd or session.meta.get("cwd") or "/")
    writer.results = {m.tool_call_id: m for m in session.messages if m.role == "tool" and m.tool_call_id}
    info = _session_info(writer)
    for message in session.messages:
        _write_message(writer, message)
    if options.extra.get("opencode_drop_snapshots"):
        _drop_snapshots(writer)
    document: dict[str, Any] = {"info": info, "messages": writer.out}
    todos = (session.meta.get("native") or {}).get("todos") if native_session(session) else None
    if todos:
        document["todos"] = todos
    return document


def _session_info(writer: _Writer) -> dict[str, Any]:
    session = writer.session
    native = native_session(session)
    start = epoch_ms(session.meta.get("created_at")) or first_time(session) or 0
    writer.clock = start
    if native and SESSION_ID.fullmatch(str(native["info"].get("id"))):  # meta is data: OpenCode's id shape only
        writer.session_id = native["info"]["id"]
        return native["info"]
    writer.session_id = writer.ids.descending("ses", start)
    writer.report.synthesize("session id (ses_, descending)")
    info: dict[str, Any] = {
        "id": writer.session_id,
        "slug": f"imported-{writer.session_id[-6:].lower()}",
        "projectID": "global",
        "directory": writer.cwd,
        "title": title(session),
        "version": TARGET_VERSION,
        "time": {"created": start, "updated": last_time(session) or start},
    }
    if session.parent_native_id and session.parent_native_id.startswith("ses_"):
        info["parentID"] = session.parent_native_id
    return info


def _tick(writer: _Writer, message: MessageIn) -> int:
    """Message times never go backwards (OpenCode orders messages by time_created, then id)."""
    writer.clock = max(writer.clock, epoch_ms(message.created_at) or writer.clock)
    return writer.clock


def _opencode_native(message: MessageIn) -> dict[str, Any] | None:
    native = message.metadata.get("native")
    if message.metadata.get("agent_source") == AGENT and isinstance(native, dict):
        return native
    return None


# --- messages --------------------------------------------------------------------------------------


def _write_message(writer: _Writer, message: MessageIn) -> None:
    native = _opencode_native(message)
    if native and isinstance(native.get("info"), dict) and message.role in ("user", "assistant"):
        _write_native(writer, message, native)
    elif message.role == "tool":
        if message.tool_call_id not in writer.consumed:
            _write_orphan_result(writer, message)
    elif message.role == "assistant":
        _write_assistant(writer, message)
    else:
        _write_user(writer, message)


def _write_native(writer: _Writer, message: MessageIn, native: dict[str, Any]) -> None:
    info = native["info"]
    writer.ids.observe(info.get("id"))
    _tick(writer, message)
    parts = []
    for part in native.get("parts") or []:
        writer.ids.observe(part.get("id"))
        if part.get("type") == "tool" and "state" not in part:
            part = _restore_tool_part(writer, message, part, info)
        parts.append(part)
    if info.get("role") == "user":
        writer.last_user = info
    writer.out.append({"info": info, "parts": parts})


def _restore_tool_part(
    writer: _Writer, message: MessageIn, stub: dict[str, Any], info: dict[str, Any]
) -> dict[str, Any]:
    call_id = str(stub.get("callID") or "")
    writer.consumed.add(call_id)
    result = writer.results.get(call_id)
    native = _opencode_native(result) if result else None
    if native and isinstance(native.get("part"), dict):
        return native["part"]
    call = next((c for c in message.tool_calls or [] if c.id == call_id), None)
    writer.report.synthesize("tool part rebuilt from the neutral tool call and result")
    return _tool_part(writer, call, result, message_id=info["id"], part_id=stub.get("id"), start=writer.clock)


def _tool_part(
    writer: _Writer,
    call: ToolCall | None,
    result: MessageIn | None,
    *,
    message_id: str,
    part_id: Any,
    start: int,
) -> dict[str, Any]:
    part = tool_part(
        call, result, ids=(part_id, message_id, writer.session_id), start=start, report=writer.report
    )
    writer.clock = max(writer.clock, part["state"]["time"]["end"])
    return part


def _user_info(writer: _Writer, message: MessageIn | None, created: int) -> dict[str, Any]:
    provider, model = _model(writer, message)
    return {
        "id": writer.ids.ascending("msg", created),
        "sessionID": writer.session_id,
        "role": "user",
        "time": {"created": created},
        "agent": _agent(writer),
        "model": {"providerID": provider, "modelID": model},
    }


def _write_user(writer: _Writer, message: MessageIn) -> dict[str, Any]:
    """Append one user message; returns its info (now `writer.last_user`)."""
    created = _tick(writer, message)
    info = _user_info(writer, message, created)
    parts = []
    for part in _user_parts(writer, message):
        parts.append(
            {
                "id": writer.ids.ascending("prt", created),
                "sessionID": writer.session_id,
                "messageID": info["id"],
                **part,
            }
        )
    if not parts:
        parts.append(
            {
                "id": writer.ids.ascending("prt", created),
                "sessionID": writer.session_id,
                "messageID": info["id"],
                "type": "text",
                "text": "",
            }
        )
        writer.report.synthesize("empty text part for a user message without content")
    if message.role == "system":
        writer.report.transform("system message → user message with a synthetic text part")
    writer.last_user = info
    writer.out.append({"info": info, "parts": parts})
    return info


def _user_parts(writer: _Writer, message: MessageIn) -> list[dict[str, Any]]:
    synthetic = message.role == "system"
    content = message.content
    if isinstance(content, str):
        return (
            [{"type": "text", "text": content, **({"synthetic": True} if synthetic else {})}]
            if content
            else []
        )
    parts = []
    for part in content or []:
        data = part.model_dump()
        converted = content_part(data)
        if converted is None:
            writer.report.drop(f"user content part type: {data.get('type')}")
            continue
        if synthetic or data.get("synthetic"):
            converted["synthetic"] = True
        parts.append(converted)
    return parts


def _write_assistant(writer: _Writer, message: MessageIn) -> None:
    created = _tick(writer, message)
    parent = writer.last_user
    if parent is None:
        parent = _user_info(writer, message, created)
        writer.out.append(
            {
                "info": parent,
                "parts": [
                    {
                        "id": writer.ids.ascending("prt", created),
                        "sessionID": writer.session_id,
                        "messageID": parent["id"],
                        "type": "text",
                        "text": "",
                    }
                ],
            }
        )
        writer.last_user = parent
        writer.report.synthesize("user message before a leading assistant message (parentID)")
    info = _assistant_info(writer, message, created, parent["id"])
    parts = _assistant_parts(writer, message, info["id"], created)
    info["time"]["completed"] = max(created, writer.clock)
    writer.out.append({"info": info, "parts": parts})


def _assistant_info(writer: _Writer, message: MessageIn, created: int, parent_id: str) -> dict[str, Any]:
    provider, model = _model(writer, message)
    agent = _agent(writer)
    return {
        "id": writer.ids.ascending("msg", created),
        "sessionID": writer.session_id,
        "role": "assistant",
        "time": {"created": created},
        "parentID": parent_id,
        "modelID": model,
        "providerID": provider,
        "mode": agent,
        "agent": agent,
        "path": {"cwd": writer.cwd, "root": writer.cwd},
        "cost": 0,
        "tokens": tokens_from_usage(message.metadata.get("usage")),
        "finish": "tool-calls" if message.tool_calls else "stop",
    }


def _assistant_parts(
    writer: _Writer, message: MessageIn, message_id: str, created: int
) -> list[dict[str, Any]]:
    def part(**fields: Any) -> dict[str, Any]:
        return {
            "id": writer.ids.ascending("prt", created),
            "sessionID": writer.session_id,
            "messageID": message_id,
            **fields,
        }

    parts = [part(type="step-start")]
    reasoning = _reasoning(writer, message, created)
    if reasoning:
        parts.append(part(**reasoning))
    for text in _assistant_texts(writer, message):
        parts.append(part(type="text", text=text, time={"start": created, "end": created}))
    for call in message.tool_calls or []:
        writer.consumed.add(call.id)
        part_id = writer.ids.ascending("prt", created)
        parts.append(
            _tool_part(
                writer,
                call,
                writer.results.get(call.id),
                message_id=message_id,
                part_id=part_id,
                start=created,
            )
        )
    finish = "tool-calls" if message.tool_calls else "stop"
    parts.append(
        part(
            type="step-finish", reason=finish, cost=0, tokens=tokens_from_usage(message.metadata.get("usage"))
        )
    )
    return parts


def _assistant_texts(writer: _Writer, message: MessageIn) -> list[str]:
    if isinstance(message.content, str):
        return [message.content] if message.content else []
    texts = []
    for part in message.content or []:
        if part.type == "text":
            texts.append(str(getattr(part, "text", "")))
        else:
            writer.report.drop(f"assistant content part type: {part.type}")
    return texts


def _reasoning(writer: _Writer, message: MessageIn, created: int) -> dict[str, Any] | None:
    thinking = message.thinking
    if thinking is None or not thinking.content:
        return None
    if thinking.encrypted:
        writer.report.drop("encrypted thinking (opaque outside its provider)")
        return None
    writer.report.transform("thinking → reasoning part (provider signature not carried)")
    return {"type": "reasoning", "text": thinking.content, "time": {"start": created, "end": created}}


def _write_orphan_result(writer: _Writer, message: MessageIn) -> None:
    """A tool result whose call is not in the session: an assistant message holding just that tool part."""
    created = _tick(writer, message)
    writer.report.synthesize("assistant message for a tool result without its call")
    parent = writer.last_user or _write_user(writer, MessageIn(role="user", content="",
                                                               created_at=message.created_at))
    stand_in = MessageIn(role="assistant", created_at=message.created_at)
    info = _assistant_info(writer, stand_in, created, parent["id"])
    part_id = writer.ids.ascending("prt", created)
    tool = _tool_part(writer, None, message, message_id=info["id"], part_id=part_id, start=created)
    info["time"]["completed"] = writer.clock
    writer.out.append({"info": info, "parts": [tool]})


def _model(writer: _Writer, message: MessageIn | None) -> tuple[str, str]:
    chosen = writer.options.extra.get("opencode_model")
    if isinstance(chosen, str) and "/" in chosen:
        provider, model = chosen.split("/", 1)
        return provider, model
    model = (
        (message.metadata.get("model") if message else None) or writer.session.meta.get("model") or "unknown"
    )
    provider = (message.metadata.get("provider") if message else None) or guess_provider(str(model))
    return str(provider), str(model)


def _agent(writer: _Writer) -> str:
    agent = writer.options.extra.get("opencode_agent")
    return agent if isinstance(agent, str) and agent else DEFAULT_AGENT


def _drop_snapshots(writer: _Writer) -> None:
    for message in writer.out:
        kept = []
        for part in message["parts"]:
            if part.get("type") in ("patch", "snapshot"):
                writer.report.drop(f"part type: {part['type']} (snapshot hash, meaningless elsewhere)")
                continue
            if "snapshot" in part:
                part = {k: v for k, v in part.items() if k != "snapshot"}
                writer.report.drop("step snapshot hash (meaningless elsewhere)")
            kept.append(part)
        message["parts"] = kept
