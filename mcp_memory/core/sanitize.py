"""Cleaning applied to every payload before it is stored, whatever the transport or import.

Two jobs: PostgreSQL cannot hold U+0000, and secrets must not reach the database (seed 1 §8,
"脱敏红线"). Opaque provider data is left byte-identical: a thinking `signature`, encrypted
reasoning (`thinking.content` when `encrypted`, `encrypted_content`, Claude's `redacted_thinking`
data, Gemini's `thoughtSignature`) authenticates or *is* the model's state; changing one character
makes the provider reject the resumed conversation, and it holds no user text to leak.
"""

from __future__ import annotations

from typing import Any, Protocol

NUL_REPLACEMENT = "\ufffd"  # PostgreSQL text and jsonb cannot hold U+0000

# keys (compared lower-case, without _ and -) whose string values are opaque provider blobs
OPAQUE_KEYS = frozenset({
    "signature", "thoughtsignature", "encryptedcontent", "reasoningencryptedcontent", "encryptedreasoning",
    "redactedthinking",
})


class Redacting(Protocol):
    def redact(self, text: str) -> tuple[str, int]: ...


def _opaque_key(key: Any) -> bool:
    return isinstance(key, str) and key.lower().replace("_", "").replace("-", "") in OPAQUE_KEYS


def _opaque_fields(value: dict[str, Any]) -> frozenset[str]:
    """Fields of this object that hold ciphertext: `content` of an encrypted thinking block, `data`
    of a redacted_thinking block."""
    fields = {key for key in value if _opaque_key(key)}
    if value.get("encrypted") is True:
        fields.add("content")
    if value.get("type") == "redacted_thinking":
        fields.add("data")
    return frozenset(fields)


def _nul_free(value: str) -> str:
    return value.replace("\x00", NUL_REPLACEMENT) if "\x00" in value else value


class Cleaner:
    """Walks a payload and returns a cleaned copy plus the number of redactions made."""

    def __init__(self, redactor: Redacting | None = None) -> None:
        self.redactor = redactor  # security.redact.Redactor, when configured

    def clean(self, payload: dict[str, Any]) -> tuple[dict[str, Any], int]:
        count = 0

        def text(value: str, *, opaque: bool) -> str:
            nonlocal count
            if "\x00" in value:
                value = value.replace("\x00", NUL_REPLACEMENT)
            if self.redactor is not None and not opaque:
                value, found = self.redactor.redact(value)
                count += found
            return value

        def walk(value: Any, opaque: bool = False) -> Any:
            if isinstance(value, str):
                return text(value, opaque=opaque)
            if isinstance(value, dict):
                skip = _opaque_fields(value)
                # keys are names, not secrets (a secret sits in the value, or in a "key=value"
                # string): only NUL is cleaned there, which keeps the walk cheap on big payloads
                return {
                    (_nul_free(k) if isinstance(k, str) else k): walk(v, opaque or k in skip)
                    for k, v in value.items()
                }
            if isinstance(value, list):
                return [walk(v, opaque) for v in value]
            return value

        return walk(payload), count
