"""The conversation view of read_session: what was said, by whom and when, without the stored
envelope (schema version, session id and append id on every message, metadata, native records).

A page of the full view repeats per message what the session says once; for a captured Claude Code
session that is several times the conversation's own size. Here the session's fields come once
(`SessionHead`) and each message keeps seq, role, its text, tool calls and results, the thinking
text and its time; `agent` names the writer where the history is inherited from another agent's
session (a fork, a relay). The agent's scaffolding (scaffolding.py) is left out, and the results of
mcp-memory's own tools are shortened: the memory already holds what they copied.
"""

from __future__ import annotations

from typing import Any

from .. import scaffolding
from ..results import Session, SessionHead, Turn, TurnCall

ECHO_CHARS = 300  # of an mcp-memory tool's earlier result, shown in the conversation view


def head(session: Session) -> SessionHead:
    meta = session.meta
    return SessionHead(session_id=session.session_id, project_id=session.project_id,
                       agent_source=session.agent_source, title=session.title,
                       cwd=_text(meta.get("cwd")), model=_text(meta.get("model")),
                       parent_session_id=session.parent_session_id, fork_seq=session.fork_seq,
                       created_at=session.created_at)


def turn(payload: dict[str, Any], *, seq: int, created_at: str, agent: str | None, echo: str | None = None) -> Turn:
    """One stored payload (already validated when it was appended) as a Turn, without its scaffolding
    parts. `echo`: the mcp-memory tool whose result this is, shortened to its beginning."""
    thinking = payload.get("thinking") or {}
    calls = [TurnCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
             for c in payload.get("tool_calls") or []]
    content = text_of(scaffolding.conversation_content(payload.get("content")))
    if echo is not None and payload.get("role") == "tool":
        content = _echo_result(content, echo)
    return Turn(seq=seq, role=payload["role"], content=content, tool_calls=calls or None,
                tool_call_id=payload.get("tool_call_id"),
                thinking=None if thinking.get("encrypted") else _text(thinking.get("content")),
                created_at=created_at, agent=agent)


def _echo_result(content: str | None, tool: str) -> str | None:
    """An earlier result of mcp-memory's own tool (a search, a recall, a whole read_session page): its
    beginning, and how much the full view holds."""
    if content is None or len(content) <= ECHO_CHARS:
        return content
    return (f"{content[:ECHO_CHARS]}… [mcp-memory {tool} result, {len(content) - ECHO_CHARS} more characters; "
            "view=full has them]")


def text_of(content: Any) -> str | None:
    """A message's content as text: parts joined by newlines, a part without text as [its type]."""
    if content is None or isinstance(content, str):
        return content
    parts = [p.get("text") if p.get("type") == "text" else f"[{p.get('type')}]" for p in content]
    return "\n".join(p for p in parts if isinstance(p, str))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
