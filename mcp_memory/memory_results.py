"""What the memory features return: decisions, context, search matches, recall (also the MCP
output schemas of the operations in operations.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .digest_results import Digest
from .schema import Model

DecisionStatus = Literal["proposed", "accepted", "rejected", "superseded"]
Visibility = Literal["private", "team", "public"]


class Alternative(Model):
    option: str = Field(description="An option that was considered.")
    why_not: str | None = Field(default=None, description="Why it was not chosen.")


class Decision(Model):
    decision_id: str
    session_id: str
    project_id: str
    message_seq: int | None = Field(default=None, description="The message the decision came from.")
    decision_type: str
    summary: str
    status: DecisionStatus
    rationale: str | None = None
    alternatives: list[Alternative] = Field(default_factory=list)
    supersedes: str | None = Field(default=None, description="The decision this one replaced.")
    superseded_by: str | None = Field(default=None, description="The decision that replaced this one.")
    metadata: dict[str, Any] = Field(default_factory=dict)
    visibility: Visibility = "team"
    version: int = Field(description="Pass as expected_version to update_decision.")
    agent_source: str | None = None
    session_title: str | None = None
    created_at: str
    updated_at: str
    score: float | None = Field(default=None, description="Relevance to the query (search only).")


class DecisionCreated(Model):
    decision_id: str
    version: int


class DecisionVersion(Model):
    version: int


class DecisionList(Model):
    decisions: list[Decision]


class ContextSet(Model):
    ok: bool = True
    revision: int = Field(description="1 for the first value of the key, then +1 per set_context.")


class ContextEntry(Model):
    key: str
    revision: int
    value: Any
    created_at: str


class ContextOut(Model):
    context: dict[str, Any] = Field(description="Current value of every key (or of the key asked for).")
    history: list[ContextEntry] | None = Field(
        default=None, description="Every value the key had, oldest first (only when a key is given).")


MatchReason = Literal["terms", "meaning", "names", "context"]


class MessageMatch(Model):
    session_id: str = Field(description="The session that holds the message (for an inherited message of a "
                                        "fork: the ancestor it was written in).")
    seq: int
    role: str
    snippet: str = Field(description="The best part of the message, query terms as **term**.")
    created_at: str
    session_title: str | None = None
    project_id: str
    agent_source: str | None = None
    score: float
    why: MatchReason = Field(default="terms", description=(
        "Why it matched: terms (it holds query terms, highlighted in the snippet), meaning (its embedding is "
        "near the question), names (it names someone the best word matches name), or context (it holds none "
        "of these and is listed as the turn next to the hit `context_of`; hits_only leaves such turns out)."))
    context_of: int | None = Field(default=None, description=(
        "For why = context: the seq (same session) of the neighbouring hit this turn is context of."))


SearchMode = Literal["fts", "semantic", "hybrid"]


class MatchList(Model):
    matches: list[MessageMatch]
    mode: SearchMode = Field(default="fts", description="The search that ran: fts (full text), semantic (vectors) "
                                                        "or hybrid (both, rank fusion).")
    note: str | None = Field(default=None, description="Why another mode than the one asked for ran.")


class RecallItem(Model):
    kind: Literal["decision", "message"]
    text: str = Field(description="The line as it appears in the block (dated, ≤ 200 characters).")
    date: str
    session_id: str
    seq: int | None = None
    decision_id: str | None = None
    status: DecisionStatus | None = None
    score: float
    why: MatchReason | None = Field(default=None, description="For a message: why it matched (as in search_messages).")
    context_of: int | None = Field(default=None, description="For a message there as context: the seq of the hit "
                                                             "it neighbours (its line says so).")
    age_days: int | None = Field(default=None, description="Whole days from the item's time to the time of the "
                                                           "recall (its line says \"3 days ago\" after the date).")


class Recall(Model):
    text: str = Field(description="Prompt-ready block: decisions first, then messages; empty when nothing matched.")
    items: list[RecallItem]
    digests: list[Digest] = Field(default_factory=list, description=(
        "With from_digest: the project's latest day digests, newest first (their lines lead the text)."))


class Agent(Model):
    name: str
    description: str
    created_at: str
