"""Session-level facts for the OpenCode writer: its own native record, title and time span."""

from __future__ import annotations

from typing import Any

from ..base import NeutralSession, epoch_ms
from .read import AGENT


def native_session(session: NeutralSession) -> dict[str, Any] | None:
    native = session.meta.get("native")
    if session.agent != AGENT or not isinstance(native, dict) or not isinstance(native.get("info"), dict):
        return None
    return native if str(native["info"].get("id", "")).startswith("ses_") else None


def title(session: NeutralSession) -> str:
    title = session.meta.get("title")
    if isinstance(title, str) and title.strip():
        return title
    for message in session.messages:
        if message.role == "user":
            text = " ".join(texts(message.content)).strip()
            if text:
                return text[:80]
    return f"Imported {session.agent} session"


def _times(session: NeutralSession) -> list[int]:
    return [t for m in session.messages if (t := epoch_ms(m.created_at)) is not None]


def first_time(session: NeutralSession) -> int | None:
    times = _times(session)
    return min(times) if times else None


def last_time(session: NeutralSession) -> int | None:
    times = _times(session)
    return max(times) if times else None


def texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [p.text for p in content or [] if p.type == "text"]
