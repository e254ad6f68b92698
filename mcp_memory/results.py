"""What the core returns: sessions, snapshots and operation results (also the MCP output schemas)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from .schema import Message, Model, Role


class Session(Model):
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


class Snapshot(Model):
    snapshot_id: int
    session_id: str
    project_id: str
    up_to_seq: int
    commit_msg: str
    created_at: str


class CreatedSession(Model):
    session_id: str


class AppendResult(Model):
    seq: int
    duplicate: bool = Field(description="True when this append_id was already stored with the same payload.")
    append_id: str
    redacted: int = Field(default=0, description="Secrets replaced by [REDACTED:…] before storing.")


class AppendManyResult(Model):
    seqs: list[int]
    duplicates: list[bool]
    append_ids: list[str]
    redacted: int = 0


class _Compact(Model):
    """Serialised without its empty fields: a conversation view is read by a model, byte by byte."""

    @model_serializer(mode="wrap")
    def _without_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


View = Literal["conversation", "full"]


class TurnCall(_Compact):
    id: str
    name: str
    arguments: str = Field(description="The arguments as the model wrote them (JSON text).")


class Turn(_Compact):
    """A message in the conversation view: what was said, by whom, when."""

    seq: int
    role: Role
    content: str | None = Field(default=None, description="The text (other parts as [type]).")
    tool_calls: list[TurnCall] | None = None
    tool_call_id: str | None = Field(default=None, description="A tool result: the call it answers.")
    thinking: str | None = Field(default=None, description="Reasoning text (none when encrypted).")
    created_at: str
    agent: str | None = Field(default=None, description="The agent that wrote it, when not the session's own "
                                                        "(a fork's or relay's inherited history).")
    native: dict[str, Any] | None = Field(default=None, description="include_native: the record as the agent "
                                                                    "wrote it.")


class SessionHead(_Compact):
    """The session's fields, once per page of the conversation view."""

    session_id: str
    project_id: str
    agent_source: str | None = None
    title: str | None = None
    cwd: str | None = None
    model: str | None = None
    parent_session_id: str | None = None
    fork_seq: int | None = None
    created_at: str


class Page(Model):
    session: SessionHead | None = Field(default=None, description="view=conversation: the session's fields, once.")
    messages: list[Turn] | list[Message] = Field(description=(
        "view=conversation (default): seq, role, content, tool calls and results, thinking text, created_at "
        "and agent; view=full: the stored neutral messages."))
    next_after_seq: int = Field(description="Pass as after_seq to read the next page.")
    has_more: bool
    scaffolding: int | None = Field(default=None, description=(
        "view=conversation: messages of this page left out as the agent's own scaffolding (injected "
        "instructions, environment blocks, reminders); view=full shows them."))


class SnapshotCreated(Model):
    snapshot_id: int
    up_to_seq: int


class SnapshotList(Model):
    snapshots: list[Snapshot]


class Forked(Model):
    session_id: str
    parent_snapshot_id: int


class SessionList(Model):
    sessions: list[Session]
    next_cursor: str | None = None


class SessionOut(Model):
    session: Session


# transfers: sessions to and from an agent's native files (core/transfers.py) ----------------------
class Imported(Model):
    """One native session as import stored it."""

    session_id: str
    native_id: str
    agent: str
    messages: int = Field(description="Messages read from the native session.")
    new: int = Field(default=0, description="Messages stored now.")
    duplicates: int = Field(default=0, description="Messages that were already stored (importing again adds nothing).")
    redacted: int = 0
    created: bool = Field(default=False, description="True when the session was created by this import.")
    report: dict[str, Any] = Field(default_factory=dict, description="What the reader dropped, transformed or "
                                                                     "synthesised.")
    error: str | None = Field(default=None, description="Why this session was not stored (the others were).")
    code: str | None = Field(default=None, description="The error's code (forbidden, invalid, conflict …).")
    project_id: str | None = Field(default=None, description="The project it went to.")
    project_rule: str | None = Field(default=None, description=(
        "Why that project: flag, config, file, session, folder or default (README, Projects)."))
    relayed_from: dict[str, Any] | None = Field(
        default=None, description="For the continuation of an exported session: the source session, snapshot and seq.")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class ImportResult(Model):
    sessions: list[Imported]
    report: dict[str, Any] = Field(description="The mapping report of every session read, merged.")
    skipped: list[str] = Field(default_factory=list,
                               description="Files or sessions that held no messages of this agent (nothing stored).")


class NativeFile(Model):
    name: str = Field(description="The file's path relative to the export's folder.")
    content: str
    encoding: Literal["utf-8", "base64"] = "utf-8"


class Exported(Model):
    session_id: str
    agent: str
    native_id: str = Field(description="The session's id in the target agent.")
    report: dict[str, Any] = Field(description="What the target format could not carry as-is (dropped, "
                                               "transformed, synthesised).")
    files: list[NativeFile] | None = Field(default=None, description="Without install: the native files.")
    installed: list[str] | None = Field(default=None, description="With install: the files written where the "
                                                                   "agent looks.")
    written: list[str] | None = Field(default=None, description="With a folder (the CLI's --out, the library): "
                                                                 "the files written there.")
    resume: str | None = Field(default=None, description="With install: the command that continues the session "
                                                         "in the agent.")
    relay: dict[str, Any] | None = Field(default=None, description="The recorded relay (snapshot_id, carried): "
                                                                   "the agent's continuation is imported as a fork.")
    cwd: str | None = Field(default=None, description=(
        "The project folder written into the session (install: the folder the agent resumes in)."))
    cwd_rule: str | None = Field(default=None, description=(
        "Why that folder: given (cwd), recorded (the session's own, present on this host) or here (install "
        "on a host that lacks the recorded folder: the current folder)."))
    warnings: list[str] = Field(default_factory=list)
