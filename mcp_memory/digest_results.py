"""What get_digest returns (also its MCP output schema). Pure pydantic, like memory_results.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .schema import Model

DigestKind = Literal["decision", "question", "file", "command"]


def digest_uri(project_id: str, day: str | None = None, session_id: str | None = None) -> str:
    """The memory:// resource of a digest (mcp/resources.py reads it)."""
    if session_id:
        return f"memory://sessions/{session_id}/digest"
    base = f"memory://projects/{project_id}/digest"
    return f"{base}/{day}" if day else base


class DigestSource(Model):
    """Where a digest line comes from: a stored message (session_id + seq) or a decision."""

    session_id: str
    seq: int | None = Field(default=None, description="The message; read_session(session_id, after_seq=seq-1).")
    decision_id: str | None = Field(default=None, description="For a decision line: the decision.")


class DigestLine(Model):
    kind: DigestKind = Field(description="decision, question (open), file or command.")
    text: str = Field(description="The line as in the block: a quote or short extract, never a rewrite.")
    status: Literal["proposed", "accepted", "rejected", "superseded"] | None = Field(
        default=None, description="For a decision: its current status.")
    sources: list[DigestSource] = Field(description="Every stored message or decision the line quotes.")


class Digest(Model):
    project_id: str
    day: str | None = Field(default=None, description="The UTC day (YYYY-MM-DD) of a day digest.")
    session_id: str | None = Field(default=None, description="The session of a session digest.")
    text: str = Field(description="Prompt-ready block of the lines, each with its sources; empty when nothing "
                                  "was stored.")
    lines: list[DigestLine]
    sessions: list[str] = Field(description="The sessions the digest read.")
    messages: int = Field(description="How many stored messages it read.")
    truncated: bool = Field(default=False, description="True when the day had more messages than one digest "
                                                       "reads; the oldest ones were read.")
    uri: str = Field(description="The memory:// resource of this digest.")
