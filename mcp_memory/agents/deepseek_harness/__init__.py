"""The DeepSeek harness (`dsh`): its append-only session event log. See README.md."""

from __future__ import annotations

from ..base import Adapter, Agent


class DeepSeekHarness(Agent):
    name = "deepseek-harness"
    display_name = "DeepSeek harness"
    write_options = {
        'compression': 'zstd (default) or none',
    }

    def adapter(self) -> Adapter:
        from .adapter import DeepSeekHarnessAdapter

        return DeepSeekHarnessAdapter()


AGENT = DeepSeekHarness()
