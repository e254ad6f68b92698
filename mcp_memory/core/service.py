"""The core service: the one place with business rules, shared by MCP, REST, the CLI and the
library API. Transports call these methods and format the results; nothing here knows a transport."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..config import Settings
from ..digest_results import Digest
from ..embeddings.providers import Provider
from ..errors import Unavailable
from ..memory_results import (
    Agent,
    Alternative,
    ContextOut,
    ContextSet,
    Decision,
    DecisionCreated,
    DecisionList,
    DecisionStatus,
    DecisionVersion,
    MatchList,
    Recall,
    SearchMode,
    Visibility,
)
from ..results import (
    AppendManyResult,
    AppendResult,
    Exported,
    Forked,
    ImportResult,
    Page,
    Session,
    SessionList,
    Snapshot,
    View,
)
from ..retrieval.tuning import DEFAULT, Tuning
from ..schema import MessageIn, Role
from ..store.append_listener import AppendListener
from ..store.db import Database
from ..store.replicas import reads
from . import context, decisions, digests, embed, hybrid, query, recall, search, sessions, snapshots, transfers, waiting
from . import messages as messages_core
from .indexer import Indexer
from .sanitize import Cleaner


class Service:
    def __init__(self, db: Database, *, cleaner: Cleaner | None = None, embedder: Provider | None = None,
                 local: transfers.Local | None = None, append_listener: AppendListener | None = None,
                 tuning: Tuning = DEFAULT) -> None:
        self.db = db
        # the ranking's numbers (retrieval/tuning.py): a benchmark or a test gives a variant
        self.tuning = tuning
        self.local = local  # the caller's machine, for callers on it (core/transfers.py); None: refuse paths
        self.settings: Settings = db.settings
        # where reads run: a standby of `[database] read_dsn` when one may answer, else `db` (store/replicas.py)
        self.reads = reads(db)
        self.cleaner = cleaner or Cleaner()
        self.embedder = embedder  # the query/message embedder of semantic search; None: full text only
        self.indexer = Indexer(db)  # the search index follows the appends (core/indexer.py)
        db.before_close(self.indexer.close)
        # wakes read_session(wait_seconds) on appends; `append_listener`: a process-wide one to share
        self.appends = waiting.AppendWaiter(db, append_listener)
        db.before_close(self.appends.close)

    # sessions (each operation's arguments are those of its input model in operations.py)
    def create_session(self, project_id: str, meta: dict[str, Any] | None = None) -> Session:
        return sessions.create(self.db, project_id, meta, cleaner=self.cleaner)

    def get_session(self, session_id: str) -> Session:
        return self.reads.run(lambda db: sessions.get(db, session_id))

    def list_sessions(
        self, *, project_id: str | None = None, agent_source: str | None = None, limit: int = 50,
        cursor: str | None = None,
    ) -> SessionList:
        return self.reads.run(lambda db: sessions.list_(db, project_id=project_id, agent_source=agent_source,
                                                        limit=limit, cursor=cursor))

    def update_session_meta(self, session_id: str, meta: dict[str, Any]) -> Session:
        return sessions.update_meta(self.db, session_id, meta, cleaner=self.cleaner)

    # messages
    def append_message(self, session_id: str, message: MessageIn | dict[str, Any]) -> AppendResult:
        batch = messages_core.prepare(message, max_bytes=self.settings.max_message_bytes, cleaner=self.cleaner,
                                 field="message")
        result = self._append(session_id, batch)
        return AppendResult(seq=result.seqs[0], duplicate=result.duplicates[0],
                            append_id=result.append_ids[0], redacted=result.redacted)

    def append_messages(self, session_id: str, messages: Sequence[MessageIn | dict[str, Any]]) -> AppendManyResult:
        batch = messages_core.prepare(messages, max_bytes=self.settings.max_message_bytes, cleaner=self.cleaner)
        return self._append(session_id, batch)

    def _append(self, session_id: str, batch: list[messages_core.Prepared]) -> AppendManyResult:
        result = messages_core.append(self.db, session_id, batch)
        if not all(result.duplicates):
            self.indexer.submit(session_id)
        return result

    def read_session(
        self, session_id: str, *, after_seq: int = 0, limit: int = 100, include_native: bool = False,
        wait_seconds: float = 0, view: View = "conversation",
    ) -> Page:
        """A page after `after_seq`; with `wait_seconds` and nothing there yet, waits for an append
        (LISTEN on this process's append listener, core/waiting.py). A wait stays on the primary."""
        def read(db: Database) -> Page:
            return messages_core.read(db, session_id, after_seq=after_seq, limit=limit,
                                      include_native=include_native, view=view)

        if waiting.check_wait(wait_seconds) == 0:
            return self.reads.run(read)
        return waiting.read_or_wait(self.appends, session_id, lambda: read(self.db), wait_seconds=wait_seconds)

    # snapshots and forks
    def create_snapshot(self, session_id: str, commit_msg: str = "", meta: dict[str, Any] | None = None) -> Snapshot:
        return snapshots.create(self.db, session_id, commit_msg, meta, cleaner=self.cleaner)

    def list_snapshots(self, session_id: str) -> list[Snapshot]:
        return self.reads.run(lambda db: snapshots.list_(db, session_id))

    def load_snapshot(self, snapshot_id: int, meta: dict[str, Any] | None = None) -> Forked:
        return snapshots.fork(self.db, snapshot_id, meta, cleaner=self.cleaner)

    # transfers to and from agents' native files (core/transfers.py) ------------------------------
    def export_session(
        self, session_id: str, to: str, *, install: bool = False, cwd: str | None = None,
        options: Mapping[str, str] | None = None,
    ) -> Exported:
        return transfers.export(self, session_id, to, install=install, cwd=cwd, options=options)

    def import_session(
        self, agent: str, *, path: str | None = None, content: str = "", name: str | None = None,
        project_id: str | None = None,
    ) -> ImportResult:
        return transfers.import_session(self, agent, path=path, content=content, name=name, project_id=project_id)

    # decisions, context, search, recall ---------------------------------------------------------
    # (rules in core/decisions.py, core/context.py, core/hybrid.py, core/recall.py)
    def record_decision(
        self, session_id: str, decision_type: str, summary: str, *, status: DecisionStatus = "accepted",
        rationale: str | None = None, message_seq: int | None = None, metadata: dict[str, Any] | None = None,
        alternatives: Sequence[Alternative | dict[str, Any] | str] | None = None, supersedes: str | None = None,
        visibility: Visibility = "team",
    ) -> DecisionCreated:
        return decisions.record(self.db, session_id, decision_type, summary, cleaner=self.cleaner, status=status,
                                rationale=rationale,
                                message_seq=message_seq, metadata=metadata, alternatives=alternatives,
                                supersedes=supersedes, visibility=visibility)

    def update_decision(
        self, decision_id: str, expected_version: int, *, status: DecisionStatus | None = None,
        summary: str | None = None, rationale: str | None = None,
        alternatives: Sequence[Alternative | dict[str, Any] | str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> DecisionVersion:
        """metadata is merged into the stored one."""
        return DecisionVersion(version=decisions.update(
            self.db, decision_id, expected_version, cleaner=self.cleaner, status=status, summary=summary,
            rationale=rationale,
            alternatives=alternatives, metadata=metadata))

    def get_decision(self, decision_id: str) -> Decision:
        return self.reads.run(lambda db: decisions.get(db, decision_id))

    def search_decisions(
        self, query: str | None = None, *, status: DecisionStatus | Sequence[DecisionStatus] | None = None,
        decision_type: str | None = None, project_id: str | None = None, agent_source: str | None = None,
        session_id: str | None = None, since: str | None = None, until: str | None = None, limit: int = 10,
    ) -> DecisionList:
        """status: one status or several. A query's words are translated against the project's indexed
        messages (core/search.py `cross_language`), so the index first catches up, as for search_messages."""
        if query:
            self.indexer.catch_up(project_id if isinstance(project_id, str) else None)
        return DecisionList(decisions=self.reads.run(lambda db: decisions.search(
            db, query, status=status, decision_type=decision_type, project_id=project_id,
            agent_source=agent_source, session_id=session_id, since=since, until=until, limit=limit)))

    def set_context(self, session_id: str, key: str, value: Any) -> ContextSet:
        return context.set_(self.db, session_id, key, value, cleaner=self.cleaner)

    def get_context(self, session_id: str, key: str | None = None) -> ContextOut:
        return self.reads.run(lambda db: context.get(db, session_id, key))

    def search_messages(
        self, query: str, *, project_id: str | None = None, agent_source: str | None = None,
        role: Role | None = None, session_id: str | None = None, since: str | None = None,
        until: str | None = None, limit: int = 10, mode: SearchMode | None = None, hits_only: bool = False,
        include_echoes: bool = False, now: str | datetime | None = None,
    ) -> MatchList:
        """mode: fts | semantic | hybrid (default: hybrid when the project has vectors, else fts).
        hits_only: leave out the turns there only as context of a neighbouring hit. include_echoes: also
        the turns that echo mcp-memory's own tools (scaffolding.py). now (library only): the time
        that "last month" in the query counts from, default the current time."""
        self.indexer.catch_up(project_id if isinstance(project_id, str) else None)
        return self.reads.run(lambda db: hybrid.search(
            db, query, embedder=self.embedder, mode=mode, project_id=project_id, agent_source=agent_source,
            role=role, session_id=session_id, since=since, until=until, limit=limit, hits_only=hits_only,
            include_echoes=include_echoes, now=now, tuning=self.tuning))

    def recall(self, query: str, *, project_id: str | None = None, limit: int = 5,
               include_echoes: bool = False, from_digest: bool = False, half_life_days: float | None = None,
               now: str | datetime | None = None) -> Recall:
        """from_digest: the project's latest day digests first (core/digests.py), then the matches.
        half_life_days: weigh recency (core/recall.py); now (library only): the time ages and "last
        month" count from, default the current time."""
        self.indexer.catch_up(project_id if isinstance(project_id, str) else None)
        return self.reads.run(lambda db: recall.recall(
            db, query, project_id=project_id, limit=limit, embedder=self.embedder, include_echoes=include_echoes,
            from_digest=from_digest, half_life_days=half_life_days, now=now, tuning=self.tuning))

    def get_digest(self, project_id: str, *, day: str | None = None, session_id: str | None = None) -> Digest:
        """Computed from the stored rows on each call: a new message or decision shows at once."""
        return self.reads.run(lambda db: digests.get(db, project_id, day=day, session_id=session_id))

    def query_memory(self, sql: str, *, limit: int = query.DEFAULT_ROWS) -> query.QueryResult:
        """One read-only SELECT over the mm_read views, as the reader of the caller's rows (core/query.py)."""
        return self.reads.run(lambda db: query.run(db, sql, limit=limit))

    def add_synonyms(self, terms: list[str]) -> list[list[str]]:
        return search.add_synonyms(self.db, terms)

    def remove_synonyms(self, terms: list[str]) -> list[str]:
        return search.remove_synonyms(self.db, terms)

    def list_synonyms(self) -> list[list[str]]:
        return self.reads.run(search.synonym_groups)

    def list_agents(self) -> list[Agent]:
        return self.reads.run(context.list_agents)

    def describe_agent(self, name: str, description: str) -> Agent:
        return context.describe_agent(self.db, name, description, cleaner=self.cleaner)

    def reindex_search(self, project_id: str | None = None, *, full: bool = False) -> int:
        """Index every stored message the search index does not have yet; returns how many.
        `full` rebuilds the index of every session (after a tokenizer change)."""
        return self.indexer.reindex(project_id, full=full)

    def recall_digest(self, *, project_id: str | None, limit: int = 5) -> Recall:
        """The recall block without a question: the project's latest decisions (session start)."""
        return self.reads.run(lambda db: recall.digest(db, project_id=project_id, limit=limit))

    # semantic search (core/embed.py, core/hybrid.py) ------------------------------------------------
    def embed_pending(self, *, project_id: str | None = None, stop: Any = None) -> int:
        """Embed the messages past the watermark with the configured provider; returns how many."""
        if self.embedder is None:
            raise Unavailable("no embedding provider is configured: add an [embeddings] section to the config file")
        batch = self.settings.embeddings.get("batch", 32)
        return embed.embed_pending(self.db, self.embedder, project_id=project_id, batch=batch, stop=stop)

    def embedding_status(self, project_id: str | None = None) -> embed.EmbedStatus:
        return embed.status(self.db, self.embedder.name if self.embedder else None, project_id)

    def semantic_unavailable(self, project_id: str | None = None) -> str | None:
        """Why semantic search cannot run (no pgvector / no provider / no vectors yet), or None."""
        return hybrid.semantic_unavailable(self.db, self.embedder, project_id)
