"""HermesAgent: `~/.hermes/state.db` and `hermes sessions export` JSONL, MCP entry in `config.yaml`. See README.md."""

from __future__ import annotations

from ..base import Adapter, Agent
from ..install_support import Installer

NAME = "hermes"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "HermesAgent"


class Hermes(Agent):
    name = NAME
    display_name = DISPLAY_NAME

    def adapter(self) -> Adapter:
        from .adapter import HermesAdapter

        return HermesAdapter()

    def installer(self) -> Installer:
        from . import install

        return install


AGENT = Hermes()
