"""What is embedded for a message: its text (the beginning, where the topic is). A bare answer
("yes, do that") is found through the turn before it: hybrid search credits a vector hit's
neighbours, as full text credits a word hit's (core/hybrid.py). Pure functions.

Versions before schema 13 also stored a "window" vector (the message after the one before it);
on the tuning parts of scripts/bench/search_quality.py ranking by it lost to the neighbour credit
on every setting measured, so it is no longer made (migration 0013 deletes the old ones)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..search.text import payload_text

MESSAGE_CHARS = 2000  # small models read ~256 tokens; the beginning carries the topic


@dataclass(frozen=True)
class EmbedItem:
    seq: int
    text: str


def items_for(seq: int, payload: dict[str, Any]) -> list[EmbedItem]:
    text = " ".join(payload_text(payload, limit=MESSAGE_CHARS, echoes=False).split())
    return [EmbedItem(seq, text)] if text else []


def batches(items: list[EmbedItem], size: int) -> list[list[EmbedItem]]:
    return [items[i:i + size] for i in range(0, len(items), size)]
