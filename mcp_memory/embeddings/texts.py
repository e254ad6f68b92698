"""What is embedded for a message: the message alone, and a short window (the message after the
one before it), which recovers what a bare answer ("yes, do that") loses. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..search.text import payload_text

MESSAGE_CHARS = 2000  # small models read ~256 tokens; the beginning carries the topic
WINDOW_PART_CHARS = 1000


@dataclass(frozen=True)
class EmbedItem:
    seq: int
    kind: str  # 'message' | 'window'
    text: str


def items_for(seq: int, payload: dict[str, Any], prev_payload: dict[str, Any] | None) -> list[EmbedItem]:
    text = " ".join(payload_text(payload, limit=MESSAGE_CHARS).split())
    if not text:
        return []
    items = [EmbedItem(seq, "message", text)]
    prev = " ".join(payload_text(prev_payload, limit=WINDOW_PART_CHARS).split()) if prev_payload else ""
    if prev:
        items.append(EmbedItem(seq, "window", f"{prev}\n{text[:WINDOW_PART_CHARS]}"))
    return items


def batches(items: list[EmbedItem], size: int) -> list[list[EmbedItem]]:
    return [items[i:i + size] for i in range(0, len(items), size)]
