"""GitHub Copilot CLI: sessions under `~/.copilot/session-state/<uuid>/events.jsonl`, MCP entry in
`mcp-config.json`, capture and recall hooks in `settings.json` (agentStop/sessionEnd: `sync copilot
--hook`, sessionStart: `recall --hook --agent copilot`). See README.md."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base import Adapter, Agent, CaptureTarget, FormatError, NeutralSession, format_guard
from ..install_support import Installer

NAME = "copilot"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "GitHub Copilot CLI"


class Copilot(Agent):
    name = NAME
    display_name = DISPLAY_NAME

    def adapter(self) -> Adapter:
        from .adapter import CopilotAdapter

        return CopilotAdapter()

    def installer(self) -> Installer:
        from . import install

        return install

    def capture_target(
        self, *, path: Path | None, session: str | None, hook: Mapping[str, Any], environ: Mapping[str, str]
    ) -> CaptureTarget:
        """The events file named by `--path`, the hook's `transcriptPath` (agentStop), or the session
        folder of the hook's `sessionId` (sessionEnd names no file) or of `--session ID`."""
        from .adapter import CopilotAdapter
        from .hooks import events_file

        chosen = path or events_file(hook, session, environ)
        if chosen is None:
            raise FormatError("say which GitHub Copilot CLI session to sync: --path events.jsonl, --session ID, "
                              "or --hook with the hook JSON on stdin")
        if not chosen.is_file():
            raise FormatError(f"no such session file: {chosen}")
        adapter = CopilotAdapter()

        def read(cursor: dict[str, Any] | None) -> tuple[list[NeutralSession], dict[str, Any]]:
            with format_guard(self.display_name, [chosen]):
                return adapter.read_incremental(chosen, cursor)

        return CaptureTarget(key=f"{self.name}:{chosen.resolve()}", read=read)

    def path_from_hook(self, hook: Mapping[str, Any]) -> Path | None:
        from .hooks import events_file

        return events_file(hook, None, {}) if hook else None

    def session_start_output(self, context: str) -> dict[str, Any]:
        # sessionStart hook stdout: Copilot sends `additionalContext` to the model as a user message
        # before the conversation. It is not written to events.jsonl (only the hook.end event holds
        # it), so it never piles up: sessionStart fires for each resume too and the recall is given
        # once per run, fresh.
        return {"additionalContext": context}


AGENT = Copilot()
