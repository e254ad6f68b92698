"""What the core returns: sessions, snapshots and operation results (also the MCP output schemas)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from .schema import Message


class Session(BaseModel):
    session_id: str
    project_id: str
    agent_source: str | None = None
    title: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    last_seq: int = Field(description="Highest seq in this session's history (0 when empty).")
    parent_session_id: str | None = Field(default=None, description="Fork lineage: the session forked from.")
    fork_seq: int | None = Field(default=None, description="Fork lineage: the parent's seq the fork starts after.")
    parent_snapshot_id: int | None = None
    created_at: str
    updated_at: str


class Snapshot(BaseModel):
    snapshot_id: int
    session_id: str
    project_id: str
    up_to_seq: int
    commit_msg: str
    created_at: str


class CreatedSession(BaseModel):
    session_id: str


class AppendResult(BaseModel):
    seq: int
    duplicate: bool = Field(description="True when this append_id was already stored with the same payload.")
    append_id: str
    redacted: int = Field(default=0, description="Secrets replaced by [REDACTED:…] before storing.")


class AppendManyResult(BaseModel):
    seqs: list[int]
    duplicates: list[bool]
    append_ids: list[str]
    redacted: int = 0


class Page(BaseModel):
    messages: list[Message]
    next_after_seq: int = Field(description="Pass as after_seq to read the next page.")
    has_more: bool


class SnapshotCreated(BaseModel):
    snapshot_id: int
    up_to_seq: int


class SnapshotList(BaseModel):
    snapshots: list[Snapshot]


class Forked(BaseModel):
    session_id: str
    parent_snapshot_id: int


class SessionList(BaseModel):
    sessions: list[Session]
    next_cursor: str | None = None


class SessionOut(BaseModel):
    session: Session
