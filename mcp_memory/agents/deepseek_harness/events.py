"""What the reader (adapter.py) and the writer (write.py) of the DeepSeek harness's event log both
need: its chunked row kinds and its id scheme."""

from __future__ import annotations

import uuid

from ..base import stable_id

CHUNK_ROWS = ("text-chunks", "reasoning-chunks", "tool-call-chunks")  # rows that hold several deltas


def dsh_uuid(*parts: object) -> str:
    """A deterministic UUID, as the harness ids its sessions and messages."""
    return str(uuid.UUID(hex=stable_id(*parts)))
