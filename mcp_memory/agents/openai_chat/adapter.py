"""OpenAI / DeepSeek chat JSON: the message list a client of an OpenAI-compatible API holds.

Format facts: the OpenAI Chat Completions message shape (`role`, `content` as a string or a list of
content parts, `tool_calls` with `function.arguments` as a JSON string, `tool` messages with
`tool_call_id`, optional `name`) and DeepSeek's `reasoning_content` field of thinking mode
(api-docs.deepseek.com/guides/thinking_mode; deepseek-ai/deepseek-harness
`packages/llm/llm-deepseek/src/serialize.ts` at b150a551; see README.md in this package, §Reasoning).
A file holds either a bare list of messages or a request body `{"messages": [...], "model": …}`.

Reasoning on write (`WriteOptions.extra["reasoning"]`):
- "tool-turns" (default, the current DeepSeek rule): `reasoning_content` is sent back on assistant
  turns that made tool calls, where the API requires it; other turns leave it out.
- "none" (the old deepseek-reasoner rule): never sent; the API rejects it in input messages.
- "all": kept on every assistant turn that has reasoning.
Without an explicit option, messages read from this format keep their `reasoning_content` as read.

The helpers `message_from_openai` / `message_to_openai` are shared with the Hermes adapter, whose
messages are OpenAI-shaped too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ...files import atomic_write, safe_name
from ...schema import MessageIn
from ..base import Adapter, FormatError, MappingReport, NeutralSession, WriteOptions, WrittenSession, stable_id
from . import DISPLAY_NAME, NAME

REASONING_POLICIES = ("tool-turns", "none", "all")
KNOWN_MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content"}
ROLE_ALIASES = {"developer": "system", "function": "tool"}


class OpenAIChatAdapter(Adapter):
    name = NAME
    display_name = DISPLAY_NAME

    def read(self, paths: Sequence[Path]) -> list[NeutralSession]:
        return [self._read_file(path) for path in _json_files(paths)]

    def _read_file(self, path: Path) -> NeutralSession:
        report = MappingReport(agent=NAME, direction="read")
        document = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(document, dict):
            raw_messages = document.get("messages") or []
            envelope = {key: value for key, value in document.items() if key != "messages"}
        else:
            raw_messages, envelope = document, None
        native_id = str((envelope or {}).get("id") or path.stem)
        model = (envelope or {}).get("model")
        messages = []
        for index, raw in enumerate(raw_messages):
            message = message_from_openai(
                raw, append_id=stable_id(NAME, native_id, index, prefix="oa_"), report=report
            )
            if message is not None:
                message.metadata.update(agent_source=NAME, **({"model": model} if model else {}))
                messages.append(message)
        if envelope:
            report.note("request fields besides messages (model, tools, …) kept under meta.native")
        meta: dict[str, Any] = {"agent_source": NAME, "native": {"envelope": envelope}}
        if model:
            meta["model"] = model
        return NeutralSession(
            agent=NAME, native_id=native_id, messages=messages, meta=meta, report=report, source_path=path
        )

    def write(self, session: NeutralSession, out_dir: Path, options: WriteOptions) -> WrittenSession:
        report = MappingReport(agent=NAME, direction="write")
        policy = options.extra.get("reasoning")
        if policy is not None and policy not in REASONING_POLICIES:
            raise FormatError(f"reasoning must be one of {', '.join(REASONING_POLICIES)}, got {policy!r}")
        messages = [_render(message, policy=policy, report=report) for message in session.messages]
        envelope = (session.meta.get("native") or {}).get("envelope") if session.agent == NAME else None
        document: Any = {**envelope, "messages": messages} if envelope else messages
        native_id = session.native_id if session.agent == NAME else ""
        if not safe_name(native_id):  # meta is data: only a plain name becomes a file name
            native_id = stable_id(session.agent, session.native_id)
        target = out_dir / f"{native_id}.json"
        atomic_write(target, json.dumps(document, ensure_ascii=False, indent=2) + "\n", within=out_dir)
        report.note("an OpenAI chat message list has no timestamps, ids or session metadata")
        return WrittenSession(native_id=native_id, files=[target], report=report)


def _json_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.rglob("*.json")) if path.is_dir() else [path])
    return files


def message_from_openai(raw: Any, *, append_id: str, report: MappingReport) -> MessageIn | None:
    """One OpenAI-shaped message dict → neutral message (native dict kept), or None if unusable."""
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
        report.drop("message without a role")
        return None
    role = ROLE_ALIASES.get(raw["role"], raw["role"])
    if role != raw["role"]:
        report.transform(f"role {raw['role']} → {role}")
    fields: dict[str, Any] = {
        "append_id": append_id,
        "role": role,
        "content": raw.get("content"),
        "name": raw.get("name") if isinstance(raw.get("name"), str) else None,
        "tool_calls": _tool_calls(raw.get("tool_calls"), report) if role == "assistant" else None,
        "tool_call_id": raw.get("tool_call_id") or (raw.get("name") if role == "tool" else None),
        "metadata": {"native": raw},
    }
    reasoning = raw.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        fields["thinking"] = {"content": reasoning}
    for key in sorted(set(raw) - KNOWN_MESSAGE_KEYS):
        report.transform(f"message field {key} (kept under metadata.native)")
    try:
        return MessageIn.model_validate(fields)
    except ValidationError as exc:
        report.drop(f"{role} message that is not a valid neutral message ({exc.errors()[0]['msg']})")
        return None


def _tool_calls(raw: Any, report: MappingReport) -> list[dict[str, Any]] | None:
    if not isinstance(raw, list) or not raw:
        return None
    calls = []
    for index, call in enumerate(raw):
        function = (call.get("function") or {}) if isinstance(call, dict) else {}
        if not function.get("name"):
            report.drop("tool call without a function name")
            continue
        calls.append(
            {
                "id": call.get("id") or f"call_{index}",
                "function": {
                    "name": function["name"],
                    "arguments": json_arguments(function.get("arguments"), report),
                },
            }
        )
    return calls or None


def json_arguments(arguments: Any, report: MappingReport) -> str:
    """Tool-call arguments as a JSON-encoded string, whatever shape the native file used."""
    if isinstance(arguments, str):
        try:
            json.loads(arguments)
            return arguments
        except ValueError:
            report.transform("tool call arguments that were not JSON → JSON string")
            return json.dumps(arguments)
    if arguments is None:
        return "{}"
    report.transform("tool call arguments given as an object → JSON string")
    return json.dumps(arguments, ensure_ascii=False)


def _render(message: MessageIn, *, policy: str | None, report: MappingReport) -> dict[str, Any]:
    native = message.metadata.get("native")
    if message.metadata.get("agent_source") == NAME and isinstance(native, dict):
        rendered = dict(native)
        if policy is not None:
            _apply_reasoning(rendered, message, policy=policy, report=report)
        return rendered
    return message_to_openai(message, policy=policy or "tool-turns", report=report)


def message_to_openai(message: MessageIn, *, policy: str, report: MappingReport) -> dict[str, Any]:
    """Neutral message → OpenAI chat message dict, naming in `report` what it cannot carry."""
    out: dict[str, Any] = {"role": message.role}
    content = message.model_dump(mode="json", include={"content"})["content"]
    if content is None and message.role in ("assistant", "tool"):
        content = ""  # DeepSeek rejects null content; "" is what its own harness sends
    out["content"] = content
    if message.name and message.role != "tool":
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = [call.model_dump(mode="json") for call in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    _apply_reasoning(out, message, policy=policy, report=report)
    report_unwritten(message, report=report, keeps_times=False)
    return out


def _apply_reasoning(out: dict[str, Any], message: MessageIn, *, policy: str, report: MappingReport) -> None:
    thinking = message.thinking
    out.pop("reasoning_content", None)
    if thinking is None or not thinking.content or message.role != "assistant":
        return
    if thinking.encrypted:
        report.drop("encrypted thinking (no plain-text reasoning to send)")
        return
    if policy == "none" or (policy == "tool-turns" and not message.tool_calls):
        scope = "thinking" if policy == "none" else "thinking on assistant turns without tool calls"
        report.drop(f"{scope} (reasoning={policy})")
        return
    out["reasoning_content"] = thinking.content
    if thinking.signature:
        report.drop("thinking signature")


def report_unwritten(message: MessageIn, *, report: MappingReport, keeps_times: bool) -> None:
    """Name what a message built from neutral fields leaves behind: times, metadata, foreign natives."""
    if message.created_at is not None and not keeps_times:
        report.drop("created_at (no timestamps in chat messages)")
    for key, value in message.metadata.items():
        if key in ("agent_source", "model") or value in (None, {}, []):
            continue
        if key == "native":
            report.drop(f"native record of {message.metadata.get('agent_source', 'another agent')}")
        else:
            report.drop(f"metadata.{key}")
