"""Names in text, for the bridges of multi-hop questions (mcp_memory/retrieval/bridge.py). Pure."""

from __future__ import annotations

import re

# a capital after a word or comma (not after . ! ?), or right after a CJK character (Latin names in Chinese text)
_NAME = re.compile(r"(?:(?<=[\w,;:)'’-]\s)|(?<=[\u3400-\u9fff，、：])\s?)([A-Z][a-z]{2,})\b")


def names_in(text: str) -> list[str]:
    """Capitalised Latin words that do not start a sentence: names, in English and most Latin
    scripts, and Latin names written inside Chinese text ("新的发票服务就叫 Ledgerly"); Chinese names
    have no such mark and are not bridged."""
    return [m.group(1) for m in _NAME.finditer(text)]
