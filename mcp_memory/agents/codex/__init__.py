"""Codex CLI: rollouts under `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`; MCP entry and hooks
(Stop: capture, SessionStart: recall) in `$CODEX_HOME/config.toml`. See README.md."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import Adapter, Agent, FormatError
from ..install_support import Installer

NAME = "codex"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "Codex CLI"


class Codex(Agent):
    name = NAME
    display_name = DISPLAY_NAME
    write_options: ClassVar[dict[str, str]] = {
        'model_provider': 'the provider recorded in the rollout; Codex resumes only sessions of its configured one (default with --install: model_provider of $CODEX_HOME/config.toml, else openai)',
        'model': 'the model recorded in the rollout (default with --install: model of $CODEX_HOME/config.toml, else the original)',
    }

    def adapter(self) -> Adapter:
        from .adapter import CodexAdapter

        return CodexAdapter()

    def installer(self) -> Installer:
        from . import install

        return install

    def path_from_hook(self, hook: Mapping[str, Any]) -> Path | None:
        """A Codex hook's JSON on stdin (Stop, SessionStart, …) names the rollout in `transcript_path`."""
        if not hook:
            return None
        path = hook.get("transcript_path")
        if not isinstance(path, str) or not path.endswith(".jsonl"):
            event = hook.get("hook_event_name") or "an unknown event"
            raise FormatError(f"hook payload of {event}: transcript_path must name a rollout file (*.jsonl)")
        return Path(path).expanduser()

    def session_start_output(self, context: str) -> dict[str, Any]:
        # A SessionStart hook's stdout JSON: Codex adds `additionalContext` to the new thread as a
        # developer message (checked with Codex CLI 0.169.0, README.md §Hooks)
        return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}


AGENT = Codex()
