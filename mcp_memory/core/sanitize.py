"""Cleaning applied to every payload before it is stored, whatever the transport or import."""

from __future__ import annotations

from typing import Any

NUL_REPLACEMENT = "\ufffd"  # PostgreSQL text and jsonb cannot hold U+0000


class Cleaner:
    """Walks a payload and returns a cleaned copy plus the number of redactions made."""

    def __init__(self, redactor: Any | None = None) -> None:
        self.redactor = redactor  # security.redact.Redactor, when configured

    def clean(self, payload: dict[str, Any]) -> tuple[dict[str, Any], int]:
        count = 0

        def walk(value: Any) -> Any:
            nonlocal count
            if isinstance(value, str):
                if "\x00" in value:
                    value = value.replace("\x00", NUL_REPLACEMENT)
                if self.redactor is not None:
                    value, found = self.redactor.redact(value)
                    count += found
                return value
            if isinstance(value, dict):
                return {walk(k) if isinstance(k, str) else k: walk(v) for k, v in value.items()}
            if isinstance(value, list):
                return [walk(v) for v in value]
            return value

        return walk(payload), count
