"""Claude Code: transcripts under `~/.claude/projects/<encoded cwd>/<session uuid>.jsonl`, capture
from its Stop/SubagentStop/PreCompact/SessionEnd hooks, MCP entry in `~/.claude.json`. See README.md."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import Adapter, Agent
from ..install_support import Installer

NAME = "claude-code"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "Claude Code"


class ClaudeCode(Agent):
    name = NAME
    display_name = DISPLAY_NAME
    write_options: ClassVar[dict[str, str]] = {
        'session_id': 'UUID: the session id of the written transcript (default: derived from the source)',
    }

    def adapter(self) -> Adapter:
        from .adapter import ClaudeCodeAdapter

        return ClaudeCodeAdapter()

    def installer(self) -> Installer:
        from . import install

        return install

    def path_from_hook(self, hook: Mapping[str, Any]) -> Path | None:
        from .adapter import transcript_from_hook

        return transcript_from_hook(hook) if hook else None

    def session_start_output(self, context: str) -> dict[str, Any]:
        # A SessionStart hook's stdout JSON: `additionalContext` is added to the session (README.md)
        return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}


AGENT = ClaudeCode()
