"""`memory://` resources: agents that browse MCP resources (an @-mention, a resource picker, a
read-resource tool) attach memory without a tool call.

- memory://sessions/{session_id}: the session's conversation view (as read_session, JSON; the first
  page — read_session pages on);
- memory://sessions/{session_id}/digest: that session's digest (text, each line with its sources);
- memory://decisions/{decision_id}: one decision (JSON);
- memory://projects/{project_id}/digest and …/digest/{day}: the project's latest (or that UTC day's)
  digest (text).

Everything is read through the Service, so the caller's token role and row-level security decide
what exists: another project's session is `[not_found]`, exactly as for the tools. Errors are
JSON-RPC errors whose message is the `[code] text` of the tools and whose data carries the code.
resources/list names the templates' concrete instances for the latest sessions and their projects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
from mcp.shared.exceptions import MCPError
from mcp.types import Resource as MCPResource

from .. import jsoncheck
from ..digest_results import digest_uri
from ..errors import Invalid, McpMemoryError, NotFound, internal

if TYPE_CHECKING:
    from ..core.service import Service
    from .server import MemoryServer

log = logging.getLogger(__name__)

MAX_ARGUMENT = 4096  # characters of a URI part or prompt argument
SESSION_PAGE = 200  # messages in a session resource (read_session pages on from next_after_seq)
LISTED_SESSIONS = 20  # concrete resources in resources/list: the latest sessions and their projects
JSON = "application/json"
TEXT = "text/plain"
# JSON-RPC error codes: MCP's "resource not found", and invalid params for the rest of the caller's errors
CODES = {"not_found": -32002, "invalid": -32602, "forbidden": -32602}


FORMS = ("memory://sessions/{session_id}, memory://sessions/{session_id}/digest, memory://decisions/{decision_id}, "
         "memory://projects/{project_id}/digest, memory://projects/{project_id}/digest/{day}")
SHOWN_URI = 200  # characters of an unknown URI echoed back


def error(exc: McpMemoryError, uri: str) -> MCPError:
    """The tools' `[code] message`, as a JSON-RPC error naming the code and the URI."""
    return MCPError(code=CODES.get(exc.code, -32603), message=exc.render(), data={"code": exc.code, "uri": uri})


def unknown(uri: str) -> MCPError:
    """A URI no template matches (another scheme, another path): `[not_found]` like a missing
    session, naming the forms there are (the SDK's own answer is a bare invalid-params error)."""
    shown = uri if len(uri) <= SHOWN_URI else uri[:SHOWN_URI] + "…"
    return error(NotFound(f"resource {shown}: this server has only {FORMS}"), shown)


async def run(uri: str, work: Callable[[], str], arguments: dict[str, str] | None = None) -> str:
    """Run blocking service work off the event loop; coded errors leave as JSON-RPC errors. The
    arguments (URI parts, prompt arguments) are screened first: text PostgreSQL cannot hold, or
    longer than any id or query, is `[invalid]` naming the argument."""
    try:
        for name, value in (arguments or {}).items():
            if len(value) > MAX_ARGUMENT:
                raise Invalid(f"{name} has {len(value)} characters; at most {MAX_ARGUMENT}")
        problem = jsoncheck.bad_text(arguments or {}, [])
        if problem:
            raise Invalid(problem)
        return await anyio.to_thread.run_sync(work)
    except McpMemoryError as exc:
        raise error(exc, uri) from exc
    except MCPError:
        raise
    except Exception as exc:  # noqa: BLE001 — never a traceback: the logged [internal] error
        raise error(internal(exc, log), uri) from exc


def register(server: MemoryServer, get_service: Callable[[], Service]) -> None:
    """Add the templates to the server."""

    @server.resource("memory://sessions/{session_id}", name="session", mime_type=JSON,
                     title="A stored session (conversation view)",
                     description="The session's fields and its first messages as read_session's conversation "
                                 "view; page on with read_session(session_id, after_seq=next_after_seq).")
    async def session(session_id: str) -> str:
        return await run(f"memory://sessions/{session_id}", lambda: get_service().read_session(
            session_id, limit=SESSION_PAGE).model_dump_json(exclude_none=True), {"session_id": session_id})

    @server.resource("memory://sessions/{session_id}/digest", name="session-digest", mime_type=TEXT,
                     title="A session's digest",
                     description="Decisions, open questions, files and commands of one session, each line "
                                 "with its source session#seq or decision id.")
    async def session_digest(session_id: str) -> str:
        def work() -> str:
            service = get_service()
            project = service.get_session(session_id).project_id
            return _text(service.get_digest(project, session_id=session_id).text)
        return await run(f"memory://sessions/{session_id}/digest", work, {"session_id": session_id})

    @server.resource("memory://decisions/{decision_id}", name="decision", mime_type=JSON,
                     title="A recorded decision",
                     description="One decision: status, summary, rationale, alternatives, its session and message.")
    async def decision(decision_id: str) -> str:
        return await run(f"memory://decisions/{decision_id}",
                         lambda: get_service().get_decision(decision_id).model_dump_json(exclude_none=True),
                         {"decision_id": decision_id})

    @server.resource("memory://projects/{project_id}/digest", name="project-digest", mime_type=TEXT,
                     title="A project's latest digest",
                     description="The project's latest day with messages: decisions with status, open questions, "
                                 "files and commands, each line with its sources.")
    async def project_digest(project_id: str) -> str:
        return await run(digest_uri(project_id), lambda: _text(get_service().get_digest(project_id).text),
                         {"project_id": project_id})

    @server.resource("memory://projects/{project_id}/digest/{day}", name="project-day-digest", mime_type=TEXT,
                     title="A project's digest of one UTC day",
                     description="As the project digest, for one UTC day (YYYY-MM-DD).")
    async def project_day_digest(project_id: str, day: str) -> str:
        def work() -> str:  # the core checks the day (YYYY-MM-DD, a calendar date)
            return _text(get_service().get_digest(project_id, day=day).text)
        return await run(digest_uri(project_id, day), work, {"project_id": project_id, "day": day})


def _text(text: str) -> str:
    return text or "Nothing stored for this digest yet."


def listed(service: Service) -> list[MCPResource]:
    """Concrete resources for resources/list: the latest sessions the token can read, their
    projects' digests, and the decisions of those sessions' projects."""
    sessions = service.list_sessions(limit=LISTED_SESSIONS).sessions
    found: list[MCPResource] = []
    projects: list[str] = []
    for s in sessions:
        title = s.title or s.session_id
        found.append(MCPResource(uri=f"memory://sessions/{s.session_id}", name=f"session {title}"[:120],
                                 description=f"Project {s.project_id}, {s.agent_source or 'unknown agent'}, "
                                             f"started {s.created_at[:16]}", mime_type=JSON))
        if s.project_id not in projects:
            projects.append(s.project_id)
    for project in projects:
        found.append(MCPResource(uri=digest_uri(project), name=f"digest of project {project}"[:120],
                                 description="Latest day: decisions, open questions, files, commands, with sources.",
                                 mime_type=TEXT))
    return found
