"""MCP prompts: `resume_from_history` puts a project's history into an agent's context in one step
(clients show prompts as slash commands or a picker): the latest day digests, the recall block for
the task (or the latest decisions without one), and how to drill down to the stored messages."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcp.server.mcpserver.prompts.base import UserMessage

from ..errors import Invalid
from .resources import run

if TYPE_CHECKING:
    from ..core.service import Service
    from .server import MemoryServer

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
You are resuming work on project {project}{task}. Below is what earlier agent sessions stored: \
day digests (quotes, each line with its source) and the history relevant to the task. It may be \
outdated: check it still applies. Follow accepted decisions; do not re-propose rejected ones \
without a new reason; never invent history. To see the context of a line, call the mcp-memory tool \
read_session with its session_id and after_seq = seq - 1 (a line names `session_id#seq`), or \
search_decisions / get_digest; the resources memory://sessions/<session_id> and \
memory://decisions/<decision_id> show the same."""
NOTHING = "No history is stored for this project yet."


def register(server: MemoryServer, get_service: Callable[[], Service]) -> None:
    @server.prompt(name="resume_from_history", title="Resume from history",
                   description="Start a task with the project's stored history in context: latest day digests "
                               "and the decisions and discussion relevant to the task, each with its source "
                               "(session_id#seq, decision id) to drill down with read_session.")
    async def resume_from_history(project_id: str, task: str = "") -> list[UserMessage]:
        """project_id: the project (e.g. the repo name); task: what you are about to do (optional)."""
        def work() -> str:
            if not project_id.strip():
                raise Invalid("project_id must be a non-empty string")
            service = get_service()
            if task.strip():
                block = service.recall(task, project_id=project_id, from_digest=True).text
            else:
                digest = service.get_digest(project_id).text
                latest = service.recall_digest(project_id=project_id).text
                block = "\n\n".join(part for part in (digest, latest) if part)
            head = INSTRUCTIONS.format(project=project_id, task=f" (task: {task.strip()})" if task.strip() else "")
            return f"{head}\n\n{block or NOTHING}"

        text = await run("prompt resume_from_history", work, {"project_id": project_id, "task": task})
        return [UserMessage(content=text)]
