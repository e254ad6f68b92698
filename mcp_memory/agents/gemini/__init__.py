"""Gemini CLI: chats under `~/.gemini/tmp/<project>/chats/`, MCP entry and capture/recall hooks in
`settings.json` (AfterAgent/SessionEnd: `sync gemini --hook`, BeforeAgent: `recall --hook`). See README.md."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import Adapter, Agent, CaptureTarget, NeutralSession, format_guard
from ..install_support import Installer

NAME = "gemini"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "Gemini CLI"
# Hook events fired while a turn is still running: a capture then leaves the last model record for later
MID_TURN_EVENTS = frozenset({"BeforeModel", "AfterModel", "BeforeToolSelection", "BeforeTool", "AfterTool",
                             "PreCompress", "Notification"})


class Gemini(Agent):
    name = NAME
    display_name = DISPLAY_NAME
    write_options: ClassVar[dict[str, str]] = {
        'refresh_last_updated': '1: set lastUpdated to now, so the session sorts first in `gemini --resume`',
    }

    def adapter(self) -> Adapter:
        from .adapter import GeminiAdapter

        return GeminiAdapter()

    def installer(self) -> Installer:
        from . import install

        return install

    def path_from_hook(self, hook: Mapping[str, Any]) -> Path | None:
        from .hooks import transcript_from_hook

        return transcript_from_hook(hook) if hook else None

    def capture_target(
        self, *, path: Path | None, session: str | None, hook: Mapping[str, Any], environ: Mapping[str, str]
    ) -> CaptureTarget:
        """As for every file-based agent, but a run from a mid-turn hook event is told the turn is not
        over (incremental.py holds back the record Gemini may still re-write)."""
        target = super().capture_target(path=path, session=session, hook=hook, environ=environ)
        settled = hook.get("hook_event_name") not in MID_TURN_EVENTS
        chat = path or self.path_from_hook(hook)
        assert chat is not None  # super() refused a run that names no chat file
        from .adapter import GeminiAdapter

        adapter = GeminiAdapter()

        def read(cursor: dict[str, Any] | None) -> tuple[list[NeutralSession], dict[str, Any]]:
            with format_guard(self.display_name, [chat]):
                return adapter.read_since(chat, cursor, settled=settled)

        return CaptureTarget(key=target.key, read=read)

    def recall_wanted(self, hook: Mapping[str, Any]) -> bool:
        """Our recall hook runs on BeforeAgent, before every prompt: only the first gets the recall."""
        from .hooks import RECALL_EVENT, first_prompt_pending

        return hook.get("hook_event_name") == RECALL_EVENT and first_prompt_pending(hook)

    def session_start_output(self, context: str) -> dict[str, Any]:
        # BeforeAgent hook stdout: Gemini sends `additionalContext` to the model as a text part
        # `<hook_context>…</hook_context>` after the prompt, and records it in the prompt's record
        from .hooks import RECALL_EVENT

        return {"hookSpecificOutput": {"hookEventName": RECALL_EVENT, "additionalContext": context}}


AGENT = Gemini()
