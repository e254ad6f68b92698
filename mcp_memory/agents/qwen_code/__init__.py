"""Qwen Code: chats under `~/.qwen/projects/<cwd>/chats/<session uuid>.jsonl`, MCP entry and capture/recall
hooks in `settings.json` (Stop/SessionEnd: `sync qwen-code --hook`, SessionStart: `recall --hook`). See
README.md."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base import Adapter, Agent
from ..install_support import Installer

NAME = "qwen-code"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "Qwen Code"


class QwenCode(Agent):
    name = NAME
    display_name = DISPLAY_NAME

    def adapter(self) -> Adapter:
        from .adapter import QwenCodeAdapter

        return QwenCodeAdapter()

    def installer(self) -> Installer:
        from . import install

        return install

    def path_from_hook(self, hook: Mapping[str, Any]) -> Path | None:
        from .install import transcript_from_hook

        return transcript_from_hook(hook) if hook else None

    def session_start_output(self, context: str) -> dict[str, Any]:
        # SessionStart stdout: Qwen Code 0.24 adds `additionalContext` to the system prompt of the
        # session (inside <qwen:session-start-context>), not to the chat file
        return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}


AGENT = QwenCode()
