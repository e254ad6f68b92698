"""Small helpers of the Claude Code writer: ids, timestamps, and the check that lines read from
Claude Code still stand for their (possibly edited) neutral message."""

from __future__ import annotations

import uuid as uuidlib
from datetime import UTC, datetime
from typing import Any

from ...schema import MessageIn
from ..base import MappingReport
from .read import AGENT, ReadState, assistant_message, user_messages

NAMESPACE = uuidlib.UUID("5b0f7e44-52c4-4c0e-9d53-2f0a2b7c7d11")


def is_uuid(value: str | None) -> bool:
    try:
        return value is not None and str(uuidlib.UUID(value)) == value.lower()
    except ValueError:
        return False


def session_uuid(agent: str, native_id: str) -> str:
    """Claude Code ids must be UUIDs: keep a Claude Code id, derive a stable one for anything else."""
    if agent == AGENT and is_uuid(native_id):
        return native_id.lower()
    return str(uuidlib.uuid5(NAMESPACE, f"{agent}:{native_id}"))


def stamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def parse_stamp(value: Any) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def rebuild(lines: list[dict[str, Any]], native: dict[str, Any]) -> list[MessageIn]:
    """The neutral messages the original lines stand for (to check they were not changed since)."""
    report = MappingReport(AGENT, "read")
    state = ReadState()
    kinds = [line.get("type") for line in lines]
    if "assistant" in kinds:
        return [assistant_message(lines, native, report, state)]
    user = next((line for line in lines if line.get("type") == "user"), None)
    return user_messages(user, report, state) if user else []


def ancestors(lines: list[dict[str, Any]], before: list[dict[str, Any]]) -> set[str]:
    """uuids of the lines before a message that its first line descends from (its chain part)."""
    by_uuid = {record.get("uuid"): record for record in before if record.get("uuid")}
    found: set[str] = set()
    current = by_uuid.get(lines[0].get("parentUuid")) if lines else None
    while current is not None and current["uuid"] not in found:
        found.add(current["uuid"])
        parent = current.get("parentUuid") or current.get("logicalParentUuid")
        current = by_uuid.get(parent)
    return found


def core(message: MessageIn) -> tuple[Any, ...]:
    payload = message.payload()
    return tuple(
        payload.get(key) for key in ("role", "content", "tool_calls", "tool_call_id", "thinking", "append_id")
    )


def text_of(content: Any) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "\n\n".join(getattr(part, "text", None) or f"[{part.type}]" for part in content)
