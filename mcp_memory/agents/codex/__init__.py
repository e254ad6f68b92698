"""Codex CLI: rollouts under `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, MCP entry in `config.toml`. See README.md."""

from __future__ import annotations

from typing import ClassVar

from ..base import Adapter, Agent
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


AGENT = Codex()
