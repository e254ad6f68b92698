"""Which Codex messages are scaffolding: text Codex itself puts into the conversation (skills list,
permission and sandbox text, tool namespaces, `<environment_context>`, AGENTS.md / user instructions,
hook context), as opposed to what the user typed or the model answered.

Codex CLI 0.169 says so itself: each `message` item carries
`internal_chat_message_metadata_passthrough.content_item_kinds`, one kind per content part
(`user.text` for a typed prompt, `environments.environment_context`, `host_skills.instructions`,
`permissions.instructions`, `agents_md.instructions`, `hooks.additional_context`, …). Older
rollouts have no kinds; there the part's opening tag decides. Facts: README.md in this package, §Scaffolding.
"""

from __future__ import annotations

from typing import Any

# content_item_kinds of Codex CLI 0.169 (prefix before the dot, or the whole kind) → neutral kind
KIND_PREFIXES: tuple[tuple[str, str | None], ...] = (
    ("user.", None),  # what the person typed: not scaffolding
    ("environments.", "environment"),
    ("host_skills.", "skills"),
    ("skills.", "skills"),
    ("permissions.", "permissions"),
    ("agents_md.", "instructions"),  # agents_md.instructions: AGENTS.md
    ("memories.", "instructions"),
    ("user_instructions", "instructions"),
    ("developer_instructions", "instructions"),
    ("collaboration_mode", "instructions"),
    ("personality", "instructions"),
    ("hooks.", "other"),
    ("tools.", "other"),
)

# opening text of a part in rollouts without kinds → neutral kind
TEXT_PREFIXES: tuple[tuple[str, str], ...] = (
    ("<environment_context>", "environment"),
    ("<user_instructions>", "instructions"),
    ("# AGENTS.md instructions", "instructions"),
    ("<developer_instructions>", "instructions"),
    ("<collaboration_mode>", "instructions"),
    ("<personality_spec>", "instructions"),
    ("<skills_instructions>", "skills"),
    ("<permissions instructions>", "permissions"),
    ("<tools>", "other"),
    ("<apps_instructions>", "other"),
    ("<turn_aborted>", "other"),
)

CONTEXT_PREFIXES = tuple(prefix for prefix, _ in TEXT_PREFIXES)


def kind_of(native_kind: Any) -> str | None:
    """Neutral scaffold kind of one Codex content_item_kind; None for typed text. Unknown kinds of a
    message that is not the user's own text are scaffolding of kind "other"."""
    if not isinstance(native_kind, str):
        return None
    for prefix, kind in KIND_PREFIXES:
        if native_kind == prefix.rstrip(".") or native_kind.startswith(prefix):
            return kind
    if native_kind.startswith(("assistant.", "model.")):
        return None
    return "other"


def kind_of_text(text: str) -> str | None:
    stripped = text.lstrip()
    for prefix, kind in TEXT_PREFIXES:
        if stripped.startswith(prefix):
            return kind
    return None


def part_kinds(item: dict[str, Any], role: str) -> list[str | None]:
    """One neutral scaffold kind (or None) per content part of a Codex `message` item."""
    content = item.get("content")
    parts: list[Any] = content if isinstance(content, list) else []
    passthrough = item.get("internal_chat_message_metadata_passthrough")
    native = passthrough.get("content_item_kinds") if isinstance(passthrough, dict) else None
    if isinstance(native, list) and len(native) == len(parts):
        return [kind_of(kind) for kind in native]
    kinds: list[str | None] = []
    for part in parts:
        text = part.get("text") if isinstance(part, dict) else None
        kind = kind_of_text(text) if isinstance(text, str) else None
        if kind is None and role == "system" and isinstance(text, str):
            kind = "instructions"  # developer text without a known tag: Codex's own instructions
        kinds.append(kind)
    return kinds


def mark(fields: dict[str, Any], kinds: list[str | None], metadata: dict[str, Any]) -> None:
    """Mark a neutral message read from a Codex `message`: the whole message when every part is
    scaffolding (`metadata["scaffold"]`), else each scaffolding part (`part["scaffold"]`)."""
    if not kinds or fields.get("role") == "assistant":
        return
    found = [kind for kind in kinds if kind is not None]
    if not found:
        return
    if len(found) == len(kinds):
        metadata["scaffold"] = found[0]
        return
    content = fields.get("content")
    if isinstance(content, list) and len(content) == len(kinds):
        fields["content"] = [
            {**part, "scaffold": kind} if kind is not None and isinstance(part, dict) else part
            for part, kind in zip(content, kinds, strict=True)
        ]
