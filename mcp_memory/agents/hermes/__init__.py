"""HermesAgent: `~/.hermes/state.db` and `hermes sessions export` JSONL, MCP entry in `config.yaml`. See README.md."""

from __future__ import annotations

from ..base import Adapter, Agent
from ..install_support import Installer


class Hermes(Agent):
    name = "hermes"
    display_name = "HermesAgent"

    def adapter(self) -> Adapter:
        from .adapter import HermesAdapter

        return HermesAdapter()

    def installer(self) -> Installer:
        from . import install

        return install


AGENT = Hermes()
