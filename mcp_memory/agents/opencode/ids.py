"""OpenCode ids: `prefix_` + 12 hex + 14 base62 (`packages/opencode/src/id/id.ts`; README.md, §Ids).

The 12 hex digits are the low 48 bits of `ms·4096 + counter`; messages and parts use them as is
(ascending: lexical order = creation order), sessions their bitwise NOT (descending: newest first).
OpenCode draws the 14 trailing characters at random; here they come from a seed so that writing the
same neutral session twice yields the same ids (re-import is then a no-op, not a duplicate).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
MASK48 = (1 << 48) - 1
SESSION_ID = re.compile(r"ses_[0-9a-f]{12}[0-9A-Za-z]{14}")  # the only session ids that name files


@dataclass
class IdMinter:
    """OpenCode-style ids: 12 hex of the 48-bit `ms·4096 + n`, then 14 base62 from a seed."""

    seed: str
    last: int = 0
    count: int = 0

    def observe(self, native_id: Any) -> None:
        if isinstance(native_id, str) and "_" in native_id:
            try:
                self.last = max(self.last, int(native_id.split("_", 1)[1][:12], 16))
            except ValueError:
                pass

    def ascending(self, prefix: str, ms: int) -> str:
        self.last = max((ms * 0x1000) & MASK48, self.last + 1) & MASK48
        return f"{prefix}_{self.last:012x}{self._random()}"

    def descending(self, prefix: str, ms: int) -> str:
        return f"{prefix}_{(~(ms * 0x1000)) & MASK48:012x}{self._random()}"

    def _random(self) -> str:
        self.count += 1
        number = int.from_bytes(hashlib.sha256(f"{self.seed}\x1f{self.count}".encode()).digest()[:12], "big")
        chars = []
        for _ in range(14):
            number, digit = divmod(number, 62)
            chars.append(BASE62[digit])
        return "".join(chars)
