"""Gemini CLI chat files → neutral messages (parsing half of the Gemini adapter).

Format facts: README.md in this package, §Records (google-gemini/gemini-cli `chatRecordingTypes.ts`
@04741d1d, `chatRecordingService.ts` @016443b5) and tests/fixtures/real/gemini (files written by Gemini
CLI 0.61.0), replayed the way 0.61's `loadConversationRecord` does: a record whose `id` was seen before
replaces it in place, `{"$set": {"messages": […]}}` replaces the whole list, other `$set` keys and
header lines merge into the session metadata, `{"$rewindTo": id}` drops that message and all after it.
The legacy `.json` file is one ConversationRecord object with `messages[]`.

Mapping: `user` → user (functionResponse parts → tool messages), `gemini` → assistant (`thoughts` →
thinking, `toolCalls` → tool_calls, each `result` → a tool message unless a later user record answers
the same call id, as 0.61 writes both), `info`/`error`/`warning` → system. The first neutral message of
a record keeps the record under `metadata["native"]`; the others point to it with `native_part_of`.

Scaffolding (what Gemini itself injects, kept for the round trip but marked so that the core leaves it
out of search, recall and relays): the `<session_context>` setup turn (environment, folder structure,
GEMINI.md memory) → `metadata["scaffold"] = "environment"`; `info`/`warning` notices → "other"; a
`<hook_context>…</hook_context>` block that a hook added after the prompt (BeforeAgent) or before it
(SessionStart, headless) → its own content part with `"scaffold": "reminder"` (the whole message when
nothing else is in it). The checks live in marks.py.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...schema import MessageIn
from ..base import MappingReport, parse_time, stable_id
from . import NAME
from .marks import is_hook_part, mark_hook_parts, scaffold_kind, split_hook_context, text_of, tool_name

AGENT = NAME
NOTICE_TYPES = ("info", "error", "warning")
SCAFFOLD_NOTICES = ("info", "warning")  # CLI chatter; an `error` record tells what went wrong, so it stays


@dataclass
class ChatState:
    report: MappingReport
    metadata: dict[str, Any] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)


def replay_lines(lines: list[Any], report: MappingReport, state: ChatState | None = None) -> ChatState:
    """JSONL lines → the final metadata and message records, as Gemini itself would load them;
    replayed onto `state` when given (capture continues from what it knew)."""
    state = ChatState(report=report) if state is None else state
    for line in lines:
        if not isinstance(line, dict):
            report.drop("line that is not a JSON object")
        elif isinstance(line.get("$rewindTo"), str):
            _rewind(state, line["$rewindTo"])
        elif isinstance(line.get("id"), str):
            _record(state, line)
        elif isinstance(line.get("$set"), dict):
            _set(state, line["$set"])
        elif isinstance(line.get("sessionId"), str):
            if state.metadata:
                report.transform("repeated header line (resume) → merged into session metadata")
            _merge(state, line)
        else:
            report.drop("unknown line (no id, $set, $rewindTo or sessionId)")
    return state


def load_legacy(document: Any, report: MappingReport) -> ChatState:
    state = ChatState(report=report)
    if not isinstance(document, dict):
        report.drop("legacy chat file that is not a JSON object")
        return state
    report.transform("legacy single-JSON chat file → read as the JSONL format")
    _merge(state, document)
    return state


def _merge(state: ChatState, header: dict[str, Any]) -> None:
    state.metadata.update({k: v for k, v in header.items() if k != "messages"})
    if isinstance(header.get("messages"), list):
        for record in header["messages"]:
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                state.records[record["id"]] = record


def _record(state: ChatState, record: dict[str, Any]) -> None:
    if record["id"] in state.records:
        state.report.transform("message record re-written with the same id → latest version kept")
    state.records[record["id"]] = record


def _set(state: ChatState, update: dict[str, Any]) -> None:
    if isinstance(update.get("messages"), list):
        state.report.transform("$set messages (full reload) → replaces the message list")
        state.records = {}
        _merge(state, {"messages": update["messages"]})
    rest = {k: v for k, v in update.items() if k != "messages"}
    if rest:
        state.report.transform("$set metadata update → merged into session metadata")
        state.metadata.update(rest)


def _rewind(state: ChatState, target: str) -> None:
    ids = list(state.records)
    cut = ids.index(target) if target in ids else 0
    state.report.transform("$rewindTo: rewound message records (discarded by Gemini too)", len(ids) - cut)
    state.records = {key: state.records[key] for key in ids[:cut]}


@dataclass
class RecordMapper:
    """Final message records → neutral messages of one session."""

    session_id: str
    report: MappingReport
    answered: set[str] = field(default_factory=set)  # call ids answered by a user functionResponse record
    out: list[MessageIn] = field(default_factory=list)
    per_record: Counter[str] = field(default_factory=Counter)  # neutral messages made from each record
    done: set[str] = field(default_factory=set)  # call ids that already have their tool message
    owner: dict[str, str] = field(default_factory=dict)  # call id → the user record its tool message comes from
    continuing: bool = False  # capture: earlier records were stored by an earlier run

    def map(self, records: list[dict[str, Any]]) -> list[MessageIn]:
        for record in records:
            if record.get("type") == "user":
                for call_id in response_ids(record.get("content")):
                    self.answered.add(call_id)
                    if not is_reload_copy(record):
                        self.owner.setdefault(call_id, record["id"])
        for record in records:
            self._record(record)
        return self.out

    def _record(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        start = len(self.out)
        if kind == "user":
            self._user(record)
        elif kind == "gemini":
            self._gemini(record)
        else:
            if kind not in NOTICE_TYPES:
                self.report.transform(f"record type {kind!r} → system message")
            else:
                self.report.transform(f"record type {kind} (CLI notice) → system message")
            self._add(record, role="system", content=text_of(record.get("content")))
            if kind in SCAFFOLD_NOTICES:
                self.out[-1].metadata["scaffold"] = "other"
        if len(self.out) > start:
            return
        if self.out:  # nothing new in it (a repeated answer): keep the record with the previous message
            self.out[-1].metadata.setdefault("native_after", []).append(record)
        elif self.continuing:
            self.report.transform("record with nothing new after an earlier capture (resume reload) → skipped")
        else:
            self._add(record, role="user" if kind == "user" else "system", content="")

    def _user(self, record: dict[str, Any]) -> None:
        content = record.get("content")
        parts = content if isinstance(content, list) else [content]
        prose = [p for p in parts if not (isinstance(p, dict) and "functionResponse" in p)]
        responses = [p["functionResponse"] for p in parts if isinstance(p, dict) and "functionResponse" in p]
        if prose or not responses:
            text = neutral_content(prose, self.report)
            kind = scaffold_kind(text) or ("reminder" if prose and all(map(is_hook_part, prose)) else None)
            marked = mark_hook_parts(prose) if kind is None else None
            self._add(record, role="user", content=marked or (split_hook_context(text) if kind is None else text))
            if kind is not None:
                self.report.transform(f"Gemini's injected {kind} turn → user message marked as scaffolding")
                self.out[-1].metadata["scaffold"] = kind
        for response in responses:
            if not isinstance(response, dict):
                continue
            call_id = str(
                response.get("id") or stable_id(self.session_id, record["id"], response.get("name"))
            )
            if call_id in self.done or self.owner.get(call_id, record["id"]) != record["id"]:
                self.report.transform(
                    "functionResponse repeating an answered call (resume reload) → not repeated"
                )
                continue
            self.done.add(call_id)
            self._add(
                record,
                role="tool",
                tool_call_id=call_id,
                content=response_text(response),
                name=response.get("name"),
            )

    def _gemini(self, record: dict[str, Any]) -> None:
        content = record.get("content")
        parts = content if isinstance(content, list) else [content]
        thought_parts = [
            p["text"]
            for p in parts
            if isinstance(p, dict) and p.get("thought") and isinstance(p.get("text"), str)
        ]
        said = [p for p in parts if not (isinstance(p, dict) and (p.get("thought") or "functionCall" in p))]
        calls = [c for c in record.get("toolCalls") or [] if isinstance(c, dict)]
        known = {c.get("id") for c in calls}
        calls += [
            p["functionCall"]
            for p in parts
            if isinstance(p, dict)
            and isinstance(p.get("functionCall"), dict)
            and p["functionCall"].get("id") not in known
        ]
        fields: dict[str, Any] = {"role": "assistant", "content": text_of(said) or None}
        thoughts = [
            thought_text(t) for t in record.get("thoughts") or [] if isinstance(t, dict)
        ] + thought_parts
        if thoughts:
            fields["thinking"] = {"content": "\n\n".join(thoughts)}
        if calls:
            fields["tool_calls"] = [self._tool_call(record, c, i) for i, c in enumerate(calls)]
        self._add(record, **fields)
        for index, call in enumerate(calls):
            call_id = fields["tool_calls"][index]["id"]
            if call_id in self.answered or call_id in self.done or call.get("result") is None:
                if call.get("result") is not None:
                    self.report.transform(
                        "toolCalls[].result also recorded as a user functionResponse → one tool message"
                    )
                continue
            self.done.add(call_id)
            when = parse_time(call.get("timestamp"))
            self._add(
                record,
                role="tool",
                tool_call_id=call_id,
                content=result_text(call["result"]),
                name=call.get("name"),
                when=when,
            )
            self.report.synthesize("tool message from toolCalls[].result")

    def _tool_call(self, record: dict[str, Any], call: dict[str, Any], index: int) -> dict[str, Any]:
        call_id = str(call.get("id") or stable_id(self.session_id, record["id"], index))
        args = call.get("args")
        arguments = json.dumps(args if args is not None else {}, ensure_ascii=False)
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": tool_name(call), "arguments": arguments},
        }

    def _add(self, record: dict[str, Any], *, when: datetime | None = None, **fields: Any) -> None:
        index = self.per_record[record["id"]]
        self.per_record[record["id"]] += 1
        metadata: dict[str, Any] = {"agent_source": AGENT}
        if index == 0:
            metadata["native"] = record
        else:
            metadata["native_part_of"] = record["id"]
        if record.get("model"):
            metadata["model"] = record["model"]
        self.out.append(
            MessageIn(
                append_id=stable_id(AGENT, self.session_id, record["id"], index, prefix="gemini-"),
                created_at=when or parse_time(record.get("timestamp")),
                metadata=metadata,
                **fields,
            )
        )


def is_reload_copy(record: dict[str, Any]) -> bool:
    """A `<gemini record id>_response` user record: what 0.61 derives from a call's result when it reloads
    a session (`convertSessionToClientHistory`) beside the user record that first answered the call, so
    the tool message keeps coming from that first record and its append_id stays the same."""
    return str(record.get("id", "")).endswith("_response")


def thought_text(thought: dict[str, Any]) -> str:
    subject, description = thought.get("subject") or "", thought.get("description") or ""
    return f"**{subject}** {description}" if subject else str(description)


def response_ids(content: Any) -> list[str]:
    parts = content if isinstance(content, list) else []
    ids = []
    for part in parts:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict) and response.get("id"):
            ids.append(str(response["id"]))
    return ids


def response_text(response: dict[str, Any]) -> str:
    body = response.get("response")
    if isinstance(body, dict) and isinstance(body.get("output"), str) and len(body) == 1:
        return body["output"]
    if isinstance(body, dict) and isinstance(body.get("error"), str) and len(body) == 1:
        return body["error"]
    return json.dumps(body, ensure_ascii=False)


def result_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    parts = result if isinstance(result, list) else [result]
    texts = []
    for part in parts:
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            texts.append(response_text(part["functionResponse"]))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            texts.append(json.dumps(part, ensure_ascii=False))
    return "\n".join(texts)


def neutral_content(parts: list[Any], report: MappingReport) -> Any:
    """Gemini parts → a string when all are text, else OpenAI-style parts."""
    if all(isinstance(p, str) or (isinstance(p, dict) and set(p) == {"text"}) for p in parts):
        return "".join(p if isinstance(p, str) else p["text"] for p in parts)
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, str):
            out.append({"type": "text", "text": part})
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append({"type": "text", "text": part["text"]})
        elif isinstance(part, dict) and isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            report.transform("inlineData part → image_url data URL")
            out.append(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{data.get('mimeType')};base64,{data.get('data')}"},
                }
            )
        elif isinstance(part, dict):
            report.transform(f"part {sorted(part)} → kept as an extra part")
            out.append({"type": "gemini_part", "part": part})
    return out
