"""Neutral session → a resumable Claude Code transcript (the writing half of the Claude Code adapter).

Rules from README.md in this package, §Resumable files (checked with Claude Code 2.1.328 by
tests/interop/test_claude_code_interop.py): one linear `parentUuid` chain, unique uuids, non-decreasing timestamps, `entrypoint: "cli"`
(the resume picker hides `sdk-*` sessions), `cwd` = the project the file is installed for, a plain
first user prompt, a title line at the end, and never a `thinking` block without its original Claude
signature (the API rejects it on every later turn). Lines read from Claude Code are written back as
they were (`metadata["native"]`); messages from other agents are rendered one content block per line,
as Claude Code itself writes them.
"""

from __future__ import annotations

import copy
import json
import re
import uuid as uuidlib
from datetime import UTC, datetime, timedelta
from typing import Any

from ...schema import MessageIn
from ..base import MappingReport, NeutralSession, WriteOptions
from .read import AGENT
from .write_support import NAMESPACE, ancestors, core, parse_stamp, rebuild, stamp, text_of

WRITE_VERSION = "2.1.328"  # the Claude Code version these rules were checked against
TOOL_ID = re.compile(r"^[A-Za-z0-9_-]+$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class TranscriptWriter:
    """Accumulates the lines of one transcript, keeping the chain linear and the timestamps in order."""

    def __init__(
        self, session: NeutralSession, session_id: str, options: WriteOptions, report: MappingReport
    ):
        self.session = session
        self.session_id = session_id
        self.options = options
        self.report = report
        self.cwd = str(options.cwd or session.meta.get("cwd") or "")
        self.sidechain = session.parent_native_id is not None
        self.agent_id = (session.meta.get("native") or {}).get("agent_id")
        self.lines: list[dict[str, Any]] = []
        self.last_uuid: str | None = None
        self.last_time: datetime | None = None
        self.used: set[str] = set()
        self.tool_lines: dict[str, str] = {}  # tool_use id → uuid of its assistant line
        self.open_calls: list[str] = []  # tool_use ids still waiting for their result
        self.foreign_calls: set[str] = set()  # tool_use ids this writer rendered from neutral tool calls
        self.tool_ids: dict[str, str] = {}  # foreign tool call id → id valid for the Anthropic API
        self.first_prompt: str | None = None
        self.last_prompt: str | None = None

    # -- driving ---------------------------------------------------------------------------------

    def write_messages(self, messages: list[MessageIn]) -> None:
        index = 0
        while index < len(messages):
            message = messages[index]
            taken = self._native(messages, index)
            if taken:
                index += taken
                continue
            self._foreign(message, index)
            index += 1
        self._close_calls()

    def write_tail(self, records: list[dict[str, Any]]) -> None:
        """The records that followed the last message in the original file."""
        for record in records:
            self._emit_record(record, required=False)

    def _native(self, messages: list[MessageIn], index: int) -> int:
        """Write a message read from Claude Code back as its original lines; returns messages consumed."""
        native = messages[index].metadata.get("native")
        if messages[index].metadata.get("agent_source") != AGENT or not isinstance(native, dict):
            return 0
        lines = native.get("lines")
        if not lines:
            return 0
        expected = rebuild(lines, native)
        count = len(expected)
        actual = messages[index : index + count]
        if [core(m) for m in expected] != [core(m) for m in actual]:
            self.report.transform(
                "Claude Code message changed since it was read: written from neutral fields"
            )
            return 0
        chain = ancestors(lines, native.get("before") or [])
        for record in native.get("before") or []:
            self._emit_record(record, required=False, side=record.get("uuid") not in chain)
        for record in lines:
            self._emit_record(record, required=record.get("type") in ("user", "assistant"))
        return count

    # -- native lines ------------------------------------------------------------------------------

    def _emit_record(self, original: dict[str, Any], *, required: bool, side: bool = False) -> None:
        record = copy.deepcopy(original)
        if "uuid" in record and not self._link(record, required, side):
            self.report.drop(f"{record.get('type')} line whose parent is not in the written file")
            return
        if "sessionId" in record and record["sessionId"] != self.session_id:
            record["sessionId"] = self.session_id
            self.report.transform("sessionId set to the written session")
        if "cwd" in record and self.cwd and record["cwd"] != self.cwd:
            record["cwd"] = self.cwd
            self.report.transform("cwd set to the target project directory")
        if record.get("entrypoint") not in (None, "cli"):
            record["entrypoint"] = "cli"  # the resume picker hides sdk-* sessions
            self.report.transform("entrypoint set to cli")
        self._track(record)
        self.lines.append(record)

    def _link(self, record: dict[str, Any], required: bool, side: bool) -> bool:
        """Keep the chain linear: message lines continue it; other lines may hang off a written line
        (Claude Code writes progress lines as siblings of tool results) but never dangle."""
        parent = record.get("parentUuid")
        logical = record.get("logicalParentUuid")
        linked = parent == self.last_uuid or (
            parent is None and logical is not None and logical == self.last_uuid
        )
        if not linked and self.last_uuid is None and parent not in self.used:
            record["parentUuid"] = None  # the original's parent is not in the file: this line is the root
            self.report.transform("parentUuid of the first line cleared (its parent was not in the file)")
            linked = True
        if side or (not linked and not required):
            if parent not in self.used:
                return False
            self._unique(record)
            return True  # a side branch of a written line, as Claude Code wrote it
        if not linked:
            record["parentUuid"] = self.last_uuid
            self.report.transform("parentUuid relinked to keep one linear chain")
        self._unique(record)
        if record.get("type") in ("user", "assistant"):
            self._in_order(record)
        self.last_uuid = record["uuid"]
        return True

    def _unique(self, record: dict[str, Any]) -> None:
        if record["uuid"] in self.used:
            record["uuid"] = self._new_uuid(record["uuid"])
            self.report.transform("duplicate uuid replaced")
        self.used.add(record["uuid"])

    def _in_order(self, record: dict[str, Any]) -> None:
        when = parse_stamp(record.get("timestamp"))
        if when is None or (self.last_time and when < self.last_time):
            when = self._next_time(None)
            record["timestamp"] = stamp(when)
            self.report.transform("message timestamp moved forward to keep the messages in order")
        self.last_time = when

    def _track(self, record: dict[str, Any]) -> None:
        message = record.get("message") or {}
        if record.get("type") == "assistant":
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self.tool_lines[str(block.get("id"))] = record["uuid"]
                    self.open_calls.append(str(block.get("id")))
        elif record.get("type") == "user":
            content = message.get("content")
            if isinstance(content, str):
                self._prompt(content, record)
                return
            for block in content or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    if (call := block.get("tool_use_id")) in self.open_calls:
                        self.open_calls.remove(call)
                elif isinstance(block, dict) and block.get("type") == "text":
                    self._prompt(block.get("text") or "", record)

    def _prompt(self, text: str, record: dict[str, Any]) -> None:
        if record.get("isMeta") or record.get("isCompactSummary") or text.lstrip().startswith("<"):
            return
        self.first_prompt = self.first_prompt or text
        self.last_prompt = text

    # -- foreign messages --------------------------------------------------------------------------

    def _foreign(self, message: MessageIn, index: int) -> None:
        if message.role == "tool":
            self._tool_result(message, index)
            return
        self._close_calls()
        if message.role == "assistant":
            self._assistant(message, index)
        elif message.role == "system":
            self.report.transform("system message → meta user line (isMeta)")
            self._user(text_of(message.content), message, index, meta=True)
        else:
            self._user(self._user_content(message), message, index, meta=False)

    def _envelope(self, kind: str, message: MessageIn | None, key: str) -> dict[str, Any]:
        new_uuid = self._new_uuid(key)
        when = self._next_time(message.created_at if message else None)
        record: dict[str, Any] = {"parentUuid": self.last_uuid, "isSidechain": self.sidechain}
        if self.sidechain and self.agent_id:
            record["agentId"] = self.agent_id
        record.update(
            {"userType": "external", "entrypoint": "cli", "cwd": self.cwd, "sessionId": self.session_id}
        )
        record.update({"version": WRITE_VERSION, "gitBranch": self.session.meta.get("git_branch") or ""})
        record.update({"type": kind, "uuid": new_uuid, "timestamp": stamp(when)})
        self.used.add(new_uuid)
        self.last_uuid, self.last_time = new_uuid, when
        return record

    def _user(self, content: Any, message: MessageIn | None, index: int, *, meta: bool) -> None:
        key = (message.append_id if message else None) or str(index)
        record = self._envelope("user", message, f"{key}:user")
        if meta:
            record["isMeta"] = True
        record["message"] = {"role": "user", "content": content}
        self._track(record)
        self.lines.append(record)

    def _user_content(self, message: MessageIn) -> Any:
        content = message.content
        if content is None or isinstance(content, str):
            return content or ""
        blocks = [self._block(part.model_dump(exclude_none=True)) for part in content]
        if all(block["type"] == "text" for block in blocks):
            if len(blocks) > 1:
                self.report.transform("user text parts joined into one plain prompt")
            return "\n\n".join(block["text"] for block in blocks)
        return blocks

    def _block(self, part: dict[str, Any]) -> dict[str, Any]:
        kind = part.get("type")
        if kind == "text":
            return {"type": "text", "text": part.get("text") or ""}
        if kind == "image_url":
            url = str((part.get("image_url") or {}).get("url") or "")
            match = re.match(r"^data:([^;,]+);base64,(.*)$", url, re.DOTALL)
            if match:
                return {
                    "type": "image",
                    "source": {"type": "base64", "media_type": match[1], "data": match[2]},
                }
            return {"type": "image", "source": {"type": "url", "url": url}}
        if kind == "image":
            return dict(part)
        self.report.drop(f"content part {kind!r} (no Claude Code equivalent), written as a text placeholder")
        return {"type": "text", "text": f"[{kind} omitted]"}

    def _assistant(self, message: MessageIn, index: int) -> None:
        blocks = self._thinking_blocks(message)
        content = message.content
        if isinstance(content, str) and content:
            blocks.append({"type": "text", "text": content})
        elif isinstance(content, list):
            blocks.extend(self._block(part.model_dump(exclude_none=True)) for part in content)
        for call in message.tool_calls or []:
            blocks.append(self._tool_use(call.id, call.function.name, call.function.arguments))
        blocks = [b for b in blocks if not (b["type"] == "text" and not b["text"].strip())]
        if not blocks:
            self.report.drop("assistant message with nothing Claude Code can show")
            return
        if not any(line.get("type") == "user" for line in self.lines):
            self.report.synthesize("opening user prompt (the API needs a user turn first)")
            self._user(f"(conversation imported from {self.session.agent})", None, index, meta=False)
        key = message.append_id or str(index)
        message_id = "msg_" + uuidlib.uuid5(NAMESPACE, f"{self.session_id}:{key}").hex[:24]
        model = message.metadata.get("model") or self.session.meta.get("model") or "unknown"
        stop = "tool_use" if message.tool_calls else "end_turn"
        for number, block in enumerate(blocks):
            record = self._envelope("assistant", message, f"{key}:block{number}")
            record["message"] = {
                "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [block],
                "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0},
            }  # fmt: skip
            self._track(record)
            self.lines.append(record)

    def _thinking_blocks(self, message: MessageIn) -> list[dict[str, Any]]:
        thinking = message.thinking
        if thinking is None or not (thinking.content or thinking.signature):
            return []
        from_claude = message.metadata.get("agent_source") == AGENT
        if from_claude and thinking.encrypted and thinking.content:
            return [{"type": "redacted_thinking", "data": thinking.content}]
        if from_claude and thinking.signature:
            return [{"type": "thinking", "thinking": thinking.content or "", "signature": thinking.signature}]
        if self.options.thinking == "text" and thinking.content and not thinking.encrypted:
            self.report.transform("reasoning without a Claude signature → text block")
            return [{"type": "text", "text": f"<thinking>\n{thinking.content}\n</thinking>"}]
        self.report.drop("reasoning without a Claude signature (a thinking block needs one)")
        return []

    def _tool_use(self, call_id: str, name: str, arguments: str) -> dict[str, Any]:
        safe_name = name if TOOL_NAME.match(name) else re.sub(r"[^A-Za-z0-9_-]", "_", name)[:128] or "tool"
        if safe_name != name:
            self.report.transform("tool name made valid for the Anthropic API")
        try:
            value = json.loads(arguments)
        except ValueError:
            value = arguments
        if not isinstance(value, dict):
            value = {"input": value}
            self.report.transform("non-object tool arguments wrapped as {input: …}")
        self.foreign_calls.add(self._tool_id(call_id))
        return {"type": "tool_use", "id": self._tool_id(call_id), "name": safe_name, "input": value}

    def _tool_id(self, call_id: str) -> str:
        if call_id not in self.tool_ids:
            safe = (
                call_id if TOOL_ID.match(call_id) else "toolu_" + uuidlib.uuid5(NAMESPACE, call_id).hex[:24]
            )
            if safe != call_id:
                self.report.transform("tool call id made valid for the Anthropic API")
            self.tool_ids[call_id] = safe
        return self.tool_ids[call_id]

    def _tool_result(self, message: MessageIn, index: int) -> None:
        call_id = self._tool_id(str(message.tool_call_id))
        if call_id not in self.open_calls:
            self.report.transform("tool result without a preceding tool call → user text")
            text = f"[result of tool call {message.tool_call_id}]\n{text_of(message.content)}"
            self._user(text, message, index, meta=False)
            return
        self._result_line(call_id, self._result_content(message.content), message, index)

    def _result_content(self, content: Any) -> Any:
        if content is None or isinstance(content, str):
            return content or ""
        return [self._block(part.model_dump(exclude_none=True)) for part in content]

    def _result_line(self, call_id: str, content: Any, message: MessageIn | None, index: int) -> None:
        key = f"{(message.append_id if message else None) or index}:result:{call_id}"
        record = self._envelope("user", message, key)
        block: dict[str, Any] = {"tool_use_id": call_id, "type": "tool_result", "content": content}
        if message is not None and message.metadata.get("is_error"):
            block["is_error"] = True
        record["message"] = {"role": "user", "content": [block]}
        record["sourceToolAssistantUUID"] = self.tool_lines.get(call_id)
        self._track(record)
        self.lines.append(record)

    def _close_calls(self) -> None:
        """The API needs a result for every tool_use before the next turn: add one where none was kept."""
        for call_id in [c for c in self.open_calls if c in self.foreign_calls]:
            self.report.synthesize("tool_result for a tool call that had no recorded result")
            self._result_line(call_id, "(no result was recorded)", None, len(self.lines))

    # -- helpers ---------------------------------------------------------------------------------

    def _new_uuid(self, key: str) -> str:
        candidate = str(uuidlib.uuid5(NAMESPACE, f"{self.session_id}:{key}"))
        while candidate in self.used:
            candidate = str(uuidlib.uuid5(NAMESPACE, candidate))
        return candidate

    def _next_time(self, wanted: datetime | None) -> datetime:
        floor = self.last_time + timedelta(milliseconds=1) if self.last_time else None
        if wanted is None:
            return floor or datetime.now(UTC)
        return max(wanted, floor) if floor else wanted

    def finish(self, title: str | None) -> None:
        """Bookkeeping lines at the end, where the resume picker reads them."""
        if not any(line.get("type") in ("user", "assistant") for line in self.lines):
            return
        if self.first_prompt is None and not self.sidechain:
            self.report.note("no plain user prompt: the resume picker lists the session by its title only")
        if self.sidechain:
            return
        title = title or (self.first_prompt or "")[:80].strip() or "Imported session"
        closing: list[dict[str, Any]] = [
            {"type": "last-prompt", "lastPrompt": self.last_prompt or title, "leafUuid": self.last_uuid,
             "sessionId": self.session_id},
            {"type": "custom-title", "customTitle": title, "sessionId": self.session_id},
        ]  # fmt: skip
        if self.lines[-2:] != closing:  # a file written by this writer already ends with them
            self.lines.extend(closing)
            self.report.synthesize("last-prompt and custom-title lines at the end (resume picker)")
