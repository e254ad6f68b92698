"""What the drills write and how they compare databases: a host's writes through the library and
through a running MCP server, and the owner's inventory of every row key a restore must bring back
(sessions, messages, every decision version, context revisions) or must not."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import psycopg

from mcp_memory.library import Memory, SessionContext

PROJECT = "drill"
INVENTORY = {
    "sessions": "SELECT session_id FROM sessions",
    "messages": "SELECT session_id || '#' || seq FROM messages",
    "decision_versions": "SELECT decision_id || '@' || version FROM decision_versions",
    "context_revisions": "SELECT session_id || ':' || key || '@' || revision FROM session_context",
}


@dataclass
class Inventory:
    """Every row key of the tables a restore must reproduce, as the owner sees them."""

    keys: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, dsn: str) -> Inventory:
        with psycopg.connect(dsn) as conn:
            return cls({name: {row[0] for row in conn.execute(query)} for name, query in INVENTORY.items()})

    def counts(self) -> dict[str, int]:
        return {name: len(keys) for name, keys in self.keys.items()}

    def minus(self, other: Inventory) -> Inventory:
        return Inventory({name: keys - other.keys.get(name, set()) for name, keys in self.keys.items()})

    def total(self) -> int:
        return sum(len(keys) for keys in self.keys.values())


@dataclass
class Writer:
    """A host writing: one library session carried through every phase (messages, a decision
    superseded each phase, a context key revised), a new library session per phase, and one MCP
    session appended to by the host's long-running server."""

    memory: Memory
    mcp: object  # mcp_stdio.McpHost
    main: SessionContext | None = None
    mcp_session: str = ""
    decision: str | None = None
    sent: list[tuple[str, dict]] = field(default_factory=list)  # (session, message) sent over MCP
    snapshots: list[int] = field(default_factory=list)  # one per phase, over MCP

    def phase(self, tag: str, messages: int) -> None:
        if self.main is None:
            self.main = self.memory.session(PROJECT, title="drill: carried through every phase", agent="drill")
            self.mcp_session = self.mcp.call("create_session", {  # type: ignore[attr-defined]
                "project_id": PROJECT, "meta": {"title": "drill: written by the MCP server", "agent_source": "drill"}
            })["session_id"]
        fresh = self.memory.session(PROJECT, title=f"drill: {tag}", agent="drill")
        for n in range(messages):
            self.main.log_user_message(f"{tag}: question {n}")
            fresh.log_assistant_message(f"{tag}: answer {n}", thinking=f"{tag} thinking {n}")
        self.main.log_tool_call("grep", {"pattern": tag}, result=f"{tag}: 3 matches")
        seq = self.main.log_assistant_message(f"{tag}: we decide")
        made = self.main.add_decision("architecture", f"{tag}: the decision", rationale=f"made in {tag}",
                                      supersedes=self.decision, message_seq=seq)
        self.decision = made.decision_id
        self.main.set_context("phase", {"tag": tag})
        fresh.set_context("created_in", tag)
        for n in range(2):
            message = {"append_id": f"drill-{tag}-{n}-{uuid.uuid4().hex[:8]}", "role": "user",
                       "content": f"{tag}: over MCP {n}"}
            self.mcp.call("append_message", {"session_id": self.mcp_session, "message": message})  # type: ignore[attr-defined]
            self.sent.append((self.mcp_session, message))
        self.snapshots.append(self.mcp.call("create_snapshot", {  # type: ignore[attr-defined]
            "session_id": self.mcp_session, "commit_msg": f"drill: {tag}"})["snapshot_id"])
