"""Cleaning applied to every stored text before it is stored, whatever the transport or import: message
payloads (`clean`), and session meta, titles, snapshot commit messages, decisions and context values
(`clean_text`, `clean_value`; the core modules call them before the store's write functions).

Two jobs: PostgreSQL cannot hold U+0000, and secrets must not reach the database
(redaction before anything is stored). Opaque provider data is left byte-identical: a thinking `signature`, encrypted
reasoning (`thinking.content` when `encrypted`, `encrypted_content`, Claude's `redacted_thinking`
data, Gemini's `thoughtSignature`) authenticates or *is* the model's state; changing one character
makes the provider reject the resumed conversation, and it holds no user text to leak.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any, Protocol

NUL_REPLACEMENT = "\ufffd"  # PostgreSQL text and jsonb cannot hold U+0000
ID_KEPT = 180  # of a redacted id, before its hash (ids are at most 200 characters)

# keys (compared lower-case, without _ and -) whose string values are opaque provider blobs
OPAQUE_KEYS = frozenset({
    "signature", "thoughtsignature", "encryptedcontent", "reasoningencryptedcontent", "encryptedreasoning",
    "redactedthinking",
})


class Redacting(Protocol):
    def redact(self, text: str) -> tuple[str, int]: ...

    def redact_field(self, key: str, text: str) -> tuple[str, int]: ...

    def may_match(self, text: str) -> bool: ...


@lru_cache(maxsize=4096)
def _opaque_key(key: str) -> bool:
    return key.lower().replace("_", "").replace("-", "") in OPAQUE_KEYS


def _opaque_fields(value: dict[str, Any]) -> frozenset[str]:
    """Fields of this object that hold ciphertext: `content` of an encrypted thinking block, `data`
    of a redacted_thinking block."""
    fields = {key for key in value if isinstance(key, str) and _opaque_key(key)}
    if value.get("encrypted") is True:
        fields.add("content")
    if value.get("type") == "redacted_thinking":
        fields.add("data")
    return frozenset(fields)


def _nul_free(value: str) -> str:
    return value.replace("\x00", NUL_REPLACEMENT) if "\x00" in value else value


class Cleaner:
    """Walks a payload and returns a cleaned copy plus the number of redactions made. What needs no
    change is returned as is (the same objects): most payloads hold no secret and no NUL."""

    def __init__(self, redactor: Redacting | None = None) -> None:
        self.redactor = redactor  # security.redact.Redactor, when configured

    def may_change(self, payload_json: str) -> bool:
        """False when cleaning the payload whose canonical JSON this is would change nothing: no
        NUL (JSON writes it as \\u0000) and nothing a redaction rule could match."""
        return "\\u0000" in payload_json or (self.redactor is not None and self.redactor.may_match(payload_json))

    def clean(self, payload: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """A message payload, cleaned (opaque provider fields kept as they are)."""
        return self.clean_value(payload)

    def clean_id(self, value: str) -> str:
        """A client's id (an `append_id`) with any secret in it redacted, still unique and the same
        for the same input: a retry after redaction dedupes as before, and two ids that differ only
        in their secret stay two ids. The redacted text is followed by `~` and 16 hex digits of the
        original's SHA-256 (a verifier for someone who can guess the whole original id; a secret
        worth keeping out of the database is one nobody can guess)."""
        cleaned = _nul_free(value)
        if self.redactor is not None:
            cleaned = self.redactor.redact(cleaned)[0]
        if cleaned == value:
            return value
        return f"{cleaned[:ID_KEPT]}~{hashlib.sha256(value.encode()).hexdigest()[:16]}"

    def clean_text(self, value: str | None) -> tuple[str | None, int]:
        """One stored text (a summary, a commit message): NUL replaced, secrets redacted."""
        if value is None:
            return None, 0
        return self.clean_value(value)

    def clean_value(self, value: Any) -> tuple[Any, int]:
        """Any JSON value that is stored (session meta, a context value, decision metadata): every
        string in it is cleaned as a payload's strings are, object keys included (a key that held a
        secret keeps a numbered marker when two would collide, so no entry is lost)."""
        count = 0
        redactor = self.redactor

        def text(value: str, opaque: bool, key: Any = None) -> str:
            nonlocal count
            if "\x00" in value:
                value = value.replace("\x00", NUL_REPLACEMENT)
            if redactor is not None and not opaque:
                # under a key that names a secret (`"db_password": "…"`) the value is judged as one
                cleaned, found = redactor.redact_field(key, value) if type(key) is str else redactor.redact(value)
                if found:
                    count += found
                    return cleaned
            return value

        def name(key: str, opaque: bool, taken: set[str]) -> str:
            nonlocal count
            new_key = _nul_free(key)
            if redactor is None or opaque:
                return new_key
            cleaned, found = redactor.redact(new_key)
            if not found:
                return new_key
            count += found
            unique, number = cleaned, 1
            while unique in taken:
                number += 1
                unique = f"{cleaned}#{number}"
            return unique

        def walk(value: Any, opaque: bool) -> Any:
            if isinstance(value, str):
                return text(value, opaque)
            if isinstance(value, dict):
                skip = _opaque_fields(value)
                changed = type(value) is not dict  # a dict subclass becomes a plain dict
                items = []
                taken = set(value)
                for key, item in value.items():
                    # keys are cleaned too (a secret can be a key: `{"ghp_…": "github"}`); the
                    # redactor's prefilter makes that cheap for the usual short names
                    new_key = name(key, opaque, taken) if isinstance(key, str) else key
                    taken.add(new_key)
                    new_item: Any
                    if type(item) is str:  # most values: no call to walk
                        new_item = text(item, opaque or key in skip, key)
                    elif type(item) is int or item is None:
                        new_item = item
                    else:
                        new_item = walk(item, opaque or key in skip)
                    changed = changed or new_key is not key or new_item is not item
                    items.append((new_key, new_item))
                return dict(items) if changed else value
            if isinstance(value, list):
                new_list = [walk(item, opaque) for item in value]
                unchanged = type(value) is list and all(a is b for a, b in zip(new_list, value, strict=True))
                return value if unchanged else new_list
            return value

        return walk(value, False), count
