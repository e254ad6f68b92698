"""Qwen Code chat records → neutral messages (the parsing half of the Qwen Code adapter).

Format facts: README.md in this package, §Records (chat files written by Qwen Code 0.24.4,
tests/fixtures/real/qwen-code). One JSON record a line, `{uuid, parentUuid, sessionId, timestamp, type,
cwd, version, message?}`, `message` being Gemini-style content `{role, parts}`; the parts are those of
Gemini CLI's API (text, `thought: true` text, functionCall, functionResponse, inlineData), so their
conversion is Gemini's (gemini/read.py).

Mapping, record by record, in file order (the store is a log: a branch the user rewound was said too):
`user` → user (functionResponse parts → tool messages), `assistant` (role `model`) → assistant
(thought parts → thinking, functionCall parts → tool_calls), `tool_result` → tool messages, `system`
(telemetry, attribution snapshots, compression, slash commands) → a system message marked as
scaffolding that keeps the record. The first neutral message of a record keeps it under
`metadata["native"]`, the others point to it with `native_part_of`, so that a write back is lossless.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ...schema import MessageIn
from ..base import MappingReport, parse_time, stable_id
from ..gemini.read import neutral_content, response_text
from . import NAME

AGENT = NAME
# user records Qwen Code writes itself (a background task's or a cron job's notice), not what was typed
NOTICE_SUBTYPES = frozenset({"notification", "background_task_completed", "cron"})


def parts_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's content parts that are objects, a `text` key holding text (others are left out)."""
    message = record.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    return [p for p in parts if isinstance(p, dict) and isinstance(p.get("text", ""), str)] if isinstance(parts, list) else []


def is_prompt(record: Any) -> bool:
    """A user record holding text the user typed."""
    if not isinstance(record, dict) or record.get("type") != "user" or record.get("subtype") in NOTICE_SUBTYPES:
        return False
    return any(isinstance(p.get("text"), str) and p["text"].strip() for p in parts_of(record))


@dataclass
class RecordMapper:
    """Chat records of one session → neutral messages; `seen` carries over between capture runs."""

    session_id: str
    report: MappingReport
    seen: Counter[str] = field(default_factory=Counter)  # uuid → records read with it (fragments share one)
    out: list[MessageIn] = field(default_factory=list)
    per_record: Counter[tuple[str, int]] = field(default_factory=Counter)  # messages made from each record

    def map(self, records: list[Any]) -> list[MessageIn]:
        for record in records:
            if not isinstance(record, dict) or not isinstance(record.get("uuid"), str) or not record["uuid"]:
                self.report.drop("line that is not a chat record (no uuid)")
                continue
            self._record(record)
        return self.out

    def _record(self, record: dict[str, Any]) -> None:
        fragment = self.seen[record["uuid"]]
        self.seen[record["uuid"]] += 1
        if fragment:
            self.report.transform("record fragment sharing an earlier uuid → messages of its own")
        start = len(self.out)
        kind = record.get("type")
        if kind == "user":
            self._user(record, fragment)
        elif kind == "assistant":
            self._assistant(record, fragment)
        elif kind == "tool_result":
            self._responses(record, fragment, parts_of(record))
        if len(self.out) == start:  # system records, and records with nothing said: kept, marked
            if kind != "system":
                self.report.transform(f"{kind!r} record with nothing said → system message marked as scaffolding")
            else:
                self.report.transform("system record (telemetry, snapshot, command) → system message marked as scaffolding")
            subtype = record.get("subtype")
            self._add(record, fragment, role="system", content=f"Qwen Code {kind} record"
                      + (f" ({subtype})" if isinstance(subtype, str) else ""))
            self.out[-1].metadata["scaffold"] = "other"

    def _user(self, record: dict[str, Any], fragment: int) -> None:
        parts = parts_of(record)
        prose = [p for p in parts if "functionResponse" not in p]
        if prose:
            self._add(record, fragment, role="user", content=neutral_content(prose, self.report))
            if record.get("subtype") in NOTICE_SUBTYPES:
                self.report.transform(f"Qwen Code's {record['subtype']} notice → user message marked as scaffolding")
                self.out[-1].metadata["scaffold"] = "other"
        self._responses(record, fragment, [p for p in parts if p not in prose])

    def _responses(self, record: dict[str, Any], fragment: int, parts: list[Any]) -> None:
        for part in parts:
            response = part.get("functionResponse") if isinstance(part, dict) else None
            if not isinstance(response, dict):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    self._add(record, fragment, role="user", content=part["text"])
                continue
            call_id = str(response.get("id") or stable_id(self.session_id, record["uuid"], len(self.out)))
            self._add(record, fragment, role="tool", tool_call_id=call_id, content=response_text(response),
                      name=response.get("name") if isinstance(response.get("name"), str) else None)

    def _assistant(self, record: dict[str, Any], fragment: int) -> None:
        parts = parts_of(record)
        thoughts = [p["text"] for p in parts if p.get("thought") and isinstance(p.get("text"), str)]
        calls = [p["functionCall"] for p in parts if isinstance(p.get("functionCall"), dict)]
        said = [p for p in parts if not (p.get("thought") or "functionCall" in p)]
        fields: dict[str, Any] = {"role": "assistant", "content": neutral_content(said, self.report) if said else None}
        if thoughts:
            fields["thinking"] = {"content": "\n\n".join(thoughts)}
        if calls:
            fields["tool_calls"] = [self._call(record, call, i) for i, call in enumerate(calls)]
        if said or thoughts or calls:
            self._add(record, fragment, **fields)

    def _call(self, record: dict[str, Any], call: dict[str, Any], index: int) -> dict[str, Any]:
        args = call.get("args")
        return {"id": str(call.get("id") or stable_id(self.session_id, record["uuid"], index)), "type": "function",
                "function": {"name": str(call.get("name") or "tool"),
                             "arguments": json.dumps(args if args is not None else {}, ensure_ascii=False)}}

    def _add(self, record: dict[str, Any], fragment: int, **fields: Any) -> None:
        index = self.per_record[record["uuid"], fragment]
        self.per_record[record["uuid"], fragment] += 1
        metadata: dict[str, Any] = {"agent_source": AGENT}
        if index == 0:
            metadata["native"] = record
        else:
            metadata["native_part_of"] = record["uuid"]
        if isinstance(record.get("model"), str):
            metadata["model"] = record["model"]
        self.out.append(MessageIn(
            append_id=stable_id(AGENT, self.session_id, record["uuid"], fragment, index, prefix="qwen-"),
            created_at=parse_time(record.get("timestamp")), metadata=metadata, **fields))


def session_facts(records: list[Any]) -> dict[str, Any]:
    """Session meta from records: the first prompt as title, cwd, model, version, start time."""
    records = [r for r in records if isinstance(r, dict)]
    facts: dict[str, Any] = {"agent_source": AGENT}
    title = next((_prompt_text(r) for r in records if is_prompt(r)), None)
    found = {
        "title": title[:200] if title else None,
        "cwd": next((r["cwd"] for r in records if isinstance(r.get("cwd"), str)), None),
        "model": next((r["model"] for r in reversed(records) if isinstance(r.get("model"), str)), None),
        "version": next((r["version"] for r in reversed(records) if isinstance(r.get("version"), str)), None),
        "created_at": next((r["timestamp"] for r in records if isinstance(r.get("timestamp"), str)), None),
    }
    facts.update({key: value for key, value in found.items() if value is not None})
    return facts


def _prompt_text(record: dict[str, Any]) -> str:
    return "".join(p["text"] for p in parts_of(record) if isinstance(p.get("text"), str)).strip()
