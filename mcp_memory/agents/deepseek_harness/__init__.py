"""The DeepSeek harness (`dsh`): its append-only session event log. See README.md."""

from __future__ import annotations

from typing import ClassVar

from ..base import Adapter, Agent


class DeepSeekHarness(Agent):
    name = "deepseek-harness"
    display_name = "DeepSeek harness"
    write_options: ClassVar[dict[str, str]] = {
        'compression': 'zstd (default) or none',
    }

    def adapter(self) -> Adapter:
        from .adapter import DeepSeekHarnessAdapter

        return DeepSeekHarnessAdapter()


AGENT = DeepSeekHarness()
