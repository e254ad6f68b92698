"""The input models of the operations (operations.py): each operation's fields, with their limits,
enums and descriptions, and the limits in one place (the core checks them again for callers that
skip the models). Pure pydantic: importing it loads no database driver."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field

from . import agents
from .core.query import DEFAULT_ROWS, MAX_ROWS, MAX_SQL_CHARS
from .memory_results import (
    Alternative,
    DecisionStatus,
    SearchMode,
    Visibility,
)
from .results import (
    View,
)
from .schema import MessageIn, Model, Role

# limits, in one place (the core checks them again for callers that skip the models)
MAX_PAGE = 1000  # read_session
MAX_BATCH = 10_000  # append_messages
MAX_SESSIONS = 200  # list_sessions
MAX_MATCHES = 100  # search_messages, search_decisions
MAX_RECALL = 20  # recall
MAX_WAIT_SECONDS = 60  # read_session(wait_seconds)
MAX_PROJECT_CHARS = 200
MAX_QUERY_CHARS = 2000  # search words
MAX_TEXT = 10_000  # decision summary and rationale, snapshot commit message
MAX_DECISION_TYPE = 100
MAX_KEY = 200  # context keys
VIEWS: tuple[View, ...] = ("conversation", "full")  # read_session(view)
MAX_IMPORT_CHARS = 32 * 1024 * 1024  # import_session(content): one native file's text
MAX_PATH_CHARS = 4096  # import_session(path), export_session(cwd)

Kind = Literal["read", "write", "idempotent"]


class Input(Model):
    """Base of the input models: unknown fields are refused (a typo never passes silently)."""

    model_config = ConfigDict(extra="forbid")


SessionId = Annotated[str, Field(min_length=1, description="A session id, ses_<uuid>.")]
Meta = Annotated[
    dict[str, Any] | None,
    Field(description="Free-form session metadata: title, agent_source, cwd, model, … (JSON object)."),
]
Project = Annotated[str | None, Field(description="Only this project (recommended: your repo's project id).")]
AgentFilter = Annotated[str | None, Field(description="Only sessions of this agent_source (claude-code, opencode, …).")]
Since = Annotated[str | None, Field(description="Only from this time on: RFC 3339, a date, or an age like 7d / 12h.")]
Until = Annotated[str | None, Field(description="Only before this time (RFC 3339 or a date).")]
SearchWords = Annotated[str, Field(
    max_length=MAX_QUERY_CHARS, description='A question or keywords in any language. Words are alternatives ranked by relevance; '
                '"quoted phrase" is required; -word excludes.')]


# sessions and messages ---------------------------------------------------------------------------
class CreateSession(Input):
    """Start a new shared session and return its session_id. Put title, agent_source (your agent's
    name) and cwd in meta so other agents can find it."""

    project_id: Annotated[str, Field(min_length=1, max_length=MAX_PROJECT_CHARS,
                                     description="Project the session belongs to (e.g. the repo name).")]
    meta: Meta = None


class AppendMessage(Input):
    """Append one neutral message (role system|user|assistant|tool; content; tool_calls; tool_call_id;
    thinking) to a session. The server assigns seq. Retrying with the same append_id and payload
    returns the original seq with duplicate=true; the same append_id with another payload is a
    [conflict]."""

    session_id: SessionId
    message: MessageIn


class AppendMessages(Input):
    """Append several messages atomically (all or nothing), in order. Same idempotency rules as
    append_message, per message."""

    session_id: SessionId
    messages: Annotated[list[MessageIn], Field(min_length=1, max_length=MAX_BATCH, description=(
        f"Messages in order (at most {MAX_BATCH}); stored in one transaction."))]


class ReadSession(Input):
    """Read a session's history in seq order, a page at a time: pass next_after_seq back as after_seq
    while has_more is true. A forked session includes its parent's history up to the fork. With
    wait_seconds and nothing after after_seq, waits until any process appends (or the time is up)."""

    session_id: SessionId
    after_seq: Annotated[int, Field(ge=0, description="Return messages with seq > after_seq.")] = 0
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE, description=f"Page size (max {MAX_PAGE}).")] = 100
    include_native: Annotated[bool, Field(
        description="Also return each message's native record (metadata.native, as the agent wrote it); "
                    "default: the neutral fields only.")] = False
    wait_seconds: Annotated[float, Field(
        ge=0, le=MAX_WAIT_SECONDS, description=f"With nothing after after_seq, wait up to this many seconds "
                                               f"(max {MAX_WAIT_SECONDS}) for a new message; 0: do not wait.")] = 0
    view: Annotated[View, Field(
        description="conversation (default): the session's fields once, then per message seq, role, text, tool "
                    "calls and results, thinking text, created_at and agent; full: the stored neutral "
                    "messages (append_id, metadata, …).")] = "conversation"


class CreateSnapshot(Input):
    """Mark the session's current end as a snapshot (a pointer, no copy); it is archived to git
    asynchronously. Use before handing the work to another agent."""

    session_id: SessionId
    commit_msg: Annotated[str, Field(max_length=MAX_TEXT,
                                     description="What this point in the session is (like a commit message).")] = ""


class ListSnapshots(Input):
    """List a session's snapshots, oldest first."""

    session_id: SessionId


class LoadSnapshot(Input):
    """Continue from a snapshot in a NEW session (a fork): it starts with the original's history up
    to the snapshot and never changes the original. Returns the new session_id."""

    snapshot_id: Annotated[int, Field(ge=1, description="The snapshot to continue from.")]
    meta: Meta = None


class ListSessions(Input):
    """List sessions, newest first, optionally by project and agent; page with next_cursor. Session
    meta comes without native records."""

    project_id: Annotated[str | None, Field(description="Only this project.")] = None
    agent_source: Annotated[str | None, Field(description="Only sessions of this agent.")] = None
    limit: Annotated[int, Field(ge=1, le=MAX_SESSIONS, description=f"Page size (max {MAX_SESSIONS}).")] = 50
    cursor: Annotated[str | None, Field(description="next_cursor from the previous page.")] = None


class UpdateSessionMeta(Input):
    """Merge keys into a session's metadata (title, status, notes for the next agent …)."""

    session_id: SessionId
    meta: Annotated[dict[str, Any], Field(description="Keys to set (merged); a key set to null is removed.")]


# decisions ---------------------------------------------------------------------------------------
Status = Annotated[DecisionStatus, Field(
    description="accepted (default), rejected (an option turned down), proposed, or superseded.")]
Alternatives = Annotated[list[Alternative] | None, Field(description="Options considered: {option, why_not}.")]
DecisionMetadata = Annotated[dict[str, Any] | None, Field(description="Free-form JSON object.")]


class RecordDecision(Input):
    """Record a decision so later agents do not re-discuss it: what was decided (or rejected), why,
    and the options turned down. Record rejected options too (status=rejected). Returns decision_id
    and version."""

    session_id: SessionId
    decision_type: Annotated[str, Field(min_length=1, max_length=MAX_DECISION_TYPE,
                                        description="Kind of decision: architecture, api, dependency, process, …")]
    summary: Annotated[str, Field(min_length=1, max_length=MAX_TEXT, description=(
        "The decision in one sentence, e.g. 'Orders do not use a message queue yet'."))]
    status: Status = "accepted"
    rationale: Annotated[str | None, Field(max_length=MAX_TEXT, description="Why — the reason the next agent needs.")] = None
    message_seq: Annotated[int | None, Field(ge=1, description="seq of the message where it was decided.")] = None
    metadata: DecisionMetadata = None
    alternatives: Alternatives = None
    supersedes: Annotated[str | None, Field(description="decision_id this one replaces; the old one is marked "
                                                        "superseded at once.")] = None
    visibility: Annotated[Visibility, Field(description="private, team (default) or public.")] = "team"


class UpdateDecision(Input):
    """Change a decision's status, summary, rationale, alternatives or metadata (merged). Optimistic:
    pass the version you read; if someone changed it since, the answer is [conflict] — read it again
    with search_decisions and retry if still right."""

    decision_id: Annotated[str, Field(min_length=1, description="dec_… from record_decision or search_decisions.")]
    expected_version: Annotated[int, Field(ge=1, description="The version you read; [conflict] if it moved.")]
    status: Annotated[DecisionStatus | None, Field(description="New status.")] = None
    summary: Annotated[str | None, Field(min_length=1, max_length=MAX_TEXT, description="New summary.")] = None
    rationale: Annotated[str | None, Field(max_length=MAX_TEXT, description="New rationale.")] = None
    alternatives: Annotated[list[Alternative] | None, Field(
        description="New list of options considered (replaces the old one).")] = None
    metadata: Annotated[dict[str, Any] | None, Field(description="Keys to merge into the metadata.")] = None


class SearchDecisions(Input):
    """Find earlier decisions (accepted, rejected, superseded, proposed) before proposing something:
    was this option already chosen or turned down, and why? Best match first; without a query,
    newest first."""

    query: Annotated[str | None, Field(max_length=MAX_QUERY_CHARS,
                                       description="Keywords or a question (any language); omit to list.")] = None
    status: Annotated[DecisionStatus | None, Field(description="Only this status, e.g. rejected.")] = None
    decision_type: Annotated[str | None, Field(description="Only this decision_type.")] = None
    project_id: Project = None
    agent_source: AgentFilter = None
    session_id: Annotated[str | None, Field(description="Only decisions of this session.")] = None
    since: Since = None
    until: Until = None
    limit: Annotated[int, Field(ge=1, le=MAX_MATCHES, description=f"At most this many (max {MAX_MATCHES}).")] = 10


# context -----------------------------------------------------------------------------------------
class SetContext(Input):
    """Store a key fact of this session (chosen stack, constraint, related document, goal) for later
    agents."""

    session_id: SessionId
    key: Annotated[str, Field(min_length=1, max_length=MAX_KEY,
                              description="e.g. selected_stack, constraint, related_doc, task_goal.")]
    value: Annotated[Any, Field(description="Any JSON value; the previous value is kept as history.")]


class GetContext(Input):
    """Read a session's key facts (current values; with a key, also every earlier value)."""

    session_id: SessionId
    key: Annotated[str | None, Field(max_length=MAX_KEY,
                                     description="One key (its history included); omit for all keys.")] = None


# search and recall -------------------------------------------------------------------------------
IncludeEchoes = Annotated[bool, Field(
    description="Also agents' earlier calls of mcp-memory's own tools and their results (echoes of "
                "earlier searches and recalls; left out by default).")]

class SearchMessages(Input):
    """Search earlier agents' messages (Chinese, English, code identifiers), best first, with
    highlighted snippets; by words and, where embeddings exist, by meaning (the result's `mode` says
    which ran). Ask in natural language; use read_session(session_id, after_seq=seq-3) to see the
    context of a match."""

    query: SearchWords
    project_id: Project = None
    agent_source: AgentFilter = None
    role: Annotated[Role | None, Field(description="Only user, assistant, tool or system messages.")] = None
    session_id: Annotated[str | None, Field(
        description="Only this session (a fork: with its inherited history).")] = None
    since: Since = None
    until: Until = None
    limit: Annotated[int, Field(ge=1, le=MAX_MATCHES, description=f"At most this many (max {MAX_MATCHES}).")] = 10
    mode: Annotated[SearchMode | None, Field(
        description="fts (words), semantic (meaning) or hybrid (both); default hybrid when available.")] = None
    hits_only: Annotated[bool, Field(
        description="Leave out the turns listed only as context of a neighbouring hit (why = context).")] = False
    include_echoes: IncludeEchoes = False


class RecallHistory(Input):
    """Start here on a new task: a short, prompt-ready block of what earlier sessions decided (with
    status: accepted / rejected / superseded) and discussed about it, each line dated. History may
    be stale."""

    query: Annotated[str, Field(max_length=MAX_QUERY_CHARS,
                                description="The current task or question, in your user's language.")]
    project_id: Project = None
    limit: Annotated[int, Field(ge=1, le=MAX_RECALL, description=f"At most this many items (max {MAX_RECALL}).")] = 5
    include_echoes: IncludeEchoes = False
    from_digest: Annotated[bool, Field(
        description="Start from digests: put the project's latest day digests (decisions, open questions, "
                    "files, commands; each line with its source session#seq or decision id) before the "
                    "matches. Needs project_id.")] = False
    half_life_days: Annotated[float | None, Field(
        gt=0, le=36500, description="Weigh recency: an item this many days old counts half as much as one "
                                    "from today (off by default; ignored for an exact identifier such as a "
                                    "file path, a function name or an error code).")] = None


class GetDigest(Input):
    """A digest of what a project's agents stored on one day (or in one session): decisions with their
    status, open questions, files and commands touched — quotes, each line linked to its source
    messages (session_id#seq) or decision, computed from the stored history on every call. Drill
    down with read_session. Without day and session_id: the project's latest day with messages."""

    project_id: Annotated[str, Field(min_length=1, max_length=MAX_PROJECT_CHARS, description="The project.")]
    day: Annotated[str | None, Field(pattern=r"^\d{4}-\d{2}-\d{2}$",
                                     description="A UTC day, YYYY-MM-DD (default: the latest day with messages).")] = None
    session_id: Annotated[str | None, Field(min_length=1, description="Digest this session instead of a day.")] = None


# read-only SQL (core/query.py, migration 0019) ---------------------------------------------------
class QueryMemory(Input):
    """Answer a counting or listing question with ONE read-only SQL query (PostgreSQL), e.g. "how
    many sessions per agent this week". Views (only these): sessions(session_id, project_id,
    agent_source, title, meta, message_count, parent_session_id, fork_seq, created_by, created_at,
    updated_at), messages(session_id, seq, project_id, role, text, tool_calls, tool_call_id, thinking,
    scaffold, agent_source, model, created_at), decisions(decision_id, session_id, project_id,
    decision_type, summary, status, rationale, alternatives, visibility, version, created_at, …),
    context(session_id, project_id, key, revision, value, current, created_at), snapshots(snapshot_id,
    session_id, project_id, up_to_seq, commit_msg, created_at). Only rows you may read are visible.
    One SELECT / WITH … SELECT / VALUES / TABLE; writes, several statements and role changes are
    [invalid]; a query running past the timeout (3 s by default) is cancelled ([invalid]); at most
    `limit` rows come back (truncated=true when there were more), long values are cut and marked.
    For finding messages by meaning or words use search_messages."""

    sql: Annotated[str, Field(min_length=1, max_length=MAX_SQL_CHARS, description=(
        "One SELECT over the views, e.g. SELECT agent_source, count(*) FROM sessions WHERE created_at > "
        "now() - interval '7 days' GROUP BY 1 ORDER BY 2 DESC. Put values in as SQL literals."))]
    limit: Annotated[int, Field(ge=1, le=MAX_ROWS, description=f"Row cap (max {MAX_ROWS}).")] = DEFAULT_ROWS


# transfers to and from agents' native files (core/transfers.py) ---------------------------------
if TYPE_CHECKING:
    AgentName = str
else:  # the registry's names, as an enum in every schema
    AgentName = Literal[tuple(agents.names())]


class ExportSession(Input):
    """Write a stored session in another agent's native format so that the agent can continue it.
    Without install, the native files come back in `files`; with install (only where the server runs
    on the caller's machine: stdio, CLI, library) they are put where the agent looks and `resume` is
    the command that continues the session there. `report` names what the target format could not
    carry; the agent's continuation, imported later, is stored as a fork of this session."""

    session_id: SessionId
    to: Annotated[AgentName, Field(description="The agent to export to.")]
    install: Annotated[bool, Field(
        description="Put the files where the agent looks (local servers only; a remote caller gets "
                    "[forbidden]).")] = False
    cwd: Annotated[str | None, Field(
        min_length=1, max_length=MAX_PATH_CHARS,
        description="The project directory the session belongs to (default: its recorded cwd); with install "
                    "it selects the agent's project folder.")] = None
    options: Annotated[dict[str, str] | None, Field(
        description="thinking: drop (default) or text (reasoning the target cannot carry, kept as text), and "
                    "the target agent's own switches (`mcp-memory export --help` lists them).")] = None


class ImportSession(Input):
    """Store an agent's native session file as neutral sessions (idempotent: importing the same
    file again adds nothing; a continuation of an exported session becomes a fork of it). Give
    `content` (the file's text, on every transport) or `path` (a file or folder on the server's
    machine: local servers only, stdio, CLI, library)."""

    agent: Annotated[AgentName, Field(description="The agent whose format the file is in.")]
    path: Annotated[str | None, Field(
        min_length=1, max_length=MAX_PATH_CHARS,
        description="A native session file or folder on the server's machine (local servers only).")] = None
    # plain `str` (not `str | None`): the MCP SDK would parse a JSON document given as text into an object
    content: Annotated[str, Field(
        max_length=MAX_IMPORT_CHARS, description="The native session file's text (JSONL or JSON); empty: none.")] = ""
    name: Annotated[str | None, Field(
        min_length=1, max_length=200,
        description="With content: the file's name as the agent wrote it (its stem can be the native session "
                    "id, its suffix the format); default session.json for one JSON document, else "
                    "session.jsonl.")] = None
    project_id: Annotated[str | None, Field(
        max_length=MAX_PROJECT_CHARS,
        description="Project of the imported sessions (default: the session's own, else its cwd's folder "
                    "name).")] = None
