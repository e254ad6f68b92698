"""The DeepSeek harness (`dsh`): its append-only session event log. See README.md."""

from __future__ import annotations

from typing import ClassVar

from ..base import Adapter, Agent

NAME = "deepseek-harness"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "DeepSeek harness"


class DeepSeekHarness(Agent):
    name = NAME
    display_name = DISPLAY_NAME
    write_options: ClassVar[dict[str, str]] = {
        'compression': 'zstd (default) or none',
    }

    def adapter(self) -> Adapter:
        from .adapter import DeepSeekHarnessAdapter

        return DeepSeekHarnessAdapter()


AGENT = DeepSeekHarness()
