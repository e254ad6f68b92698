"""Codex CLI: rollouts under `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, MCP entry in `config.toml`. See README.md."""

from __future__ import annotations

from types import ModuleType

from ..base import Adapter, Agent


class Codex(Agent):
    name = "codex"
    display_name = "Codex CLI"

    def adapter(self) -> Adapter:
        from .adapter import CodexAdapter

        return CodexAdapter()

    def installer(self) -> ModuleType:
        from . import install

        return install


AGENT = Codex()
