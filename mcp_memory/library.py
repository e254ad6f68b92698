"""The library API for custom agent loops, LangChain, AutoGen …: synchronous, on the
same core as the MCP server, so what a script logs is what every agent finds.

    from mcp_memory import Memory

    with Memory() as mem:                          # the configured database (or the embedded one)
        ctx = mem.session("shop", title="订单模块架构评估", agent="planning-agent")
        ctx.log_user_message("帮我评估订单模块是否要引入消息队列")
        ctx.log_assistant_message("结论：日订单量低于 10 万时不需要引入消息队列")
        ctx.add_decision("architecture", "订单模块暂不引入消息队列", rationale="峰值 QPS 较低")
        print(ctx.remember("订单要不要上消息队列？"))
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Self

from .config import Settings
from .core.query import DEFAULT_ROWS, QueryResult
from .core.service import Service
from .digest_results import Digest
from .memory_results import ContextOut, DecisionCreated, DecisionList, DecisionStatus, MatchList, Recall, SearchMode
from .results import Exported, ImportResult, Page, View
from .schema import Role


class Memory:
    """Entry point: owns a Service (and its connection pool) unless one is given."""

    def __init__(self, dsn: str | None = None, *, settings: Settings | None = None,
                 service: Service | None = None) -> None:
        if service is None:
            from .wiring import build

            service = build(settings, dsn=dsn, application_name="mcp-memory library")
            self._owned = True
        else:
            self._owned = False
        self.service = service

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owned:
            self.service.db.close()

    def session(self, project_id: str | None = None, *, session_id: str | None = None, title: str | None = None,
                agent: str | None = None, meta: dict[str, Any] | None = None) -> SessionContext:
        """A new session of `project_id`, or (with session_id) an existing one to continue."""
        if session_id is not None:
            session = self.service.get_session(session_id)
        else:
            if project_id is None:
                raise ValueError("give project_id for a new session, or session_id to continue one")
            details = {**(meta or {}), **{k: v for k, v in (("title", title), ("agent_source", agent)) if v}}
            session = self.service.create_session(project_id, details)
        return SessionContext(self.service, session.session_id, session.project_id)

    def search(self, query: str, *, project_id: str | None = None, agent_source: str | None = None,
               role: Role | None = None, session_id: str | None = None, since: str | None = None,
               until: str | None = None, limit: int = 10, mode: SearchMode | None = None,
               include_echoes: bool = False) -> MatchList:
        """As the search_messages tool (the arguments of inputs.SearchMessages)."""
        return self.service.search_messages(query, project_id=project_id, agent_source=agent_source, role=role,
                                            session_id=session_id, since=since, until=until, limit=limit,
                                            mode=mode, include_echoes=include_echoes)

    def search_decisions(self, query: str | None = None, *, status: DecisionStatus | None = None,
                         decision_type: str | None = None, project_id: str | None = None,
                         agent_source: str | None = None, session_id: str | None = None, since: str | None = None,
                         until: str | None = None, limit: int = 10) -> DecisionList:
        """As the search_decisions tool (the arguments of inputs.SearchDecisions)."""
        return self.service.search_decisions(query, status=status, decision_type=decision_type,
                                             project_id=project_id, agent_source=agent_source,
                                             session_id=session_id, since=since, until=until, limit=limit)

    def recall(self, query: str, *, project_id: str | None = None, limit: int = 5,
               include_echoes: bool = False, from_digest: bool = False,
               half_life_days: float | None = None) -> Recall:
        """As the recall tool; half_life_days weighs recency (off by default, core/recall.py)."""
        return self.service.recall(query, project_id=project_id, limit=limit, include_echoes=include_echoes,
                                   from_digest=from_digest, half_life_days=half_life_days)

    def digest(self, project_id: str, *, day: str | None = None, session_id: str | None = None) -> Digest:
        """As the get_digest tool: a day's (default: the latest) or a session's digest, lines with sources."""
        return self.service.get_digest(project_id, day=day, session_id=session_id)

    def export_session(self, session_id: str, to: str, *, install: bool = False, cwd: str | None = None,
                       options: dict[str, str] | None = None) -> Exported:
        """As the export_session tool: the session in agent `to`'s native files (`files`), or with
        install put where that agent looks (`installed`, `resume`)."""
        return self.service.export_session(session_id, to, install=install, cwd=cwd, options=options)

    def import_session(self, agent: str, *, path: str | None = None, content: str = "",
                       name: str | None = None, project_id: str | None = None) -> ImportResult:
        """As the import_session tool: a native session file or folder (`path`) or one file's text
        (`content`, named `name`) stored as neutral sessions; importing again adds nothing."""
        return self.service.import_session(agent, path=path, content=content, name=name, project_id=project_id)


    def query(self, sql: str, *, limit: int = DEFAULT_ROWS) -> QueryResult:
        """As the query_memory tool: one read-only SELECT over the views sessions, messages,
        decisions, context and snapshots; `columns`, `rows` (at most `limit`), `truncated`."""
        return self.service.query_memory(sql, limit=limit)


class SessionContext:
    """The `ctx`: one session, written turn by turn from inside the agent loop."""

    def __init__(self, service: Service, session_id: str, project_id: str) -> None:
        self.service = service
        self.session_id = session_id
        self.project_id = project_id

    def _append(self, message: dict[str, Any], append_id: str | None) -> int:
        message["append_id"] = append_id or f"lib_{uuid.uuid4().hex}"
        return self.service.append_message(self.session_id, message).seq

    def log_user_message(self, content: Any, *, metadata: dict[str, Any] | None = None,
                         append_id: str | None = None) -> int:
        """Returns the message's seq. Give append_id to make a retry safe."""
        return self._append({"role": "user", "content": content, "metadata": metadata or {}}, append_id)

    def log_assistant_message(self, content: Any, *, thinking: str | None = None,
                              metadata: dict[str, Any] | None = None, append_id: str | None = None) -> int:
        message: dict[str, Any] = {"role": "assistant", "content": content, "metadata": metadata or {}}
        if thinking:
            message["thinking"] = {"content": thinking, "encrypted": False}
        return self._append(message, append_id)

    def log_tool_call(self, name: str, arguments: dict[str, Any] | str, result: Any = None, *,
                      call_id: str | None = None) -> tuple[int, int | None]:
        """The assistant's call and, when given, the tool's result: (call seq, result seq or None)."""
        call_id = call_id or f"call_{uuid.uuid4().hex[:12]}"
        encoded = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        call = {"role": "assistant", "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": encoded}}]}
        call_seq = self._append(call, None)
        if result is None:
            return call_seq, None
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        return call_seq, self._append({"role": "tool", "tool_call_id": call_id, "content": text}, None)

    def add_decision(self, decision_type: str, summary: str, status: DecisionStatus = "accepted", rationale: str | None = None,
                     *, alternatives: list[Any] | None = None, metadata: dict[str, Any] | None = None,
                     supersedes: str | None = None, message_seq: int | None = None) -> DecisionCreated:
        """Record a decision. Without message_seq, a short assistant message states it first and the
        decision points at that message."""
        if message_seq is None:
            message_seq = self.log_assistant_message(f"Decision ({status}, {decision_type}): {summary}",
                                                     metadata={"kind": "decision_summary"})
        return self.service.record_decision(self.session_id, decision_type, summary, status=status,
                                            rationale=rationale, message_seq=message_seq, metadata=metadata,
                                            alternatives=alternatives, supersedes=supersedes)

    def set_context(self, key: str, value: Any) -> int:
        """Returns the key's new revision."""
        return self.service.set_context(self.session_id, key, value).revision

    def get_context(self, key: str | None = None) -> ContextOut:
        return self.service.get_context(self.session_id, key)

    def remember(self, question: str, *, limit: int = 5, project_id: str | None = None) -> str:
        """The prompt-ready recall block for this session's project ('' when nothing is relevant)."""
        return self.service.recall(question, project_id=project_id or self.project_id, limit=limit).text

    def read(self, *, after_seq: int = 0, limit: int = 100, include_native: bool = False,
             wait_seconds: float = 0, view: View = "full") -> Page:
        """A page of the session (as the read_session tool, but the full view by default: code reads
        the typed messages; view="conversation" for a prompt); `wait_seconds` waits for a new
        message when there is none after `after_seq` yet."""
        return self.service.read_session(self.session_id, after_seq=after_seq, limit=limit,
                                         include_native=include_native, wait_seconds=wait_seconds, view=view)
