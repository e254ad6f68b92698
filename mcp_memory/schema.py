"""Neutral message schema v1 — the contract between every agent adapter and the store.

OpenAI chat messages as the base (role, content, tool_calls, tool_call_id), plus `thinking`
(nullable, possibly encrypted), `metadata` (project, agent_source, model, native record …) and
`schema_version`. Strict where it is stored: unknown top-level fields are rejected so that a typo
never silently disappears; `metadata` is the open extension point.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from .errors import Invalid

SCHEMA_VERSION: Final = 1
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


class Model(BaseModel):
    """The base of the package's models: a model's validator is built at its first use, not at
    import (`serve` answers tools/list from mcp/tools.json and needs none of them to start)."""

    model_config = ConfigDict(defer_build=True)


class _Strict(Model):
    model_config = ConfigDict(extra="forbid")


class FunctionCall(_Strict):
    name: Annotated[str, Field(min_length=1, description="Name of the called tool/function.")]
    arguments: Annotated[str, Field(description="The arguments as a JSON-encoded string (OpenAI shape).")]

    @field_validator("arguments")
    @classmethod
    def _arguments_are_json(cls, value: str) -> str:
        try:
            json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON-encoded string ({exc.msg})") from None
        except ValueError as exc:  # e.g. an integer past Python's digit limit
            raise ValueError(f"must be a JSON-encoded string ({exc})") from None
        return value


class ToolCall(_Strict):
    id: Annotated[str, Field(min_length=1, description="Stable id, echoed by the tool message's tool_call_id.")]
    type: Literal["function"] = "function"
    function: FunctionCall


class Thinking(_Strict):
    content: str | None = Field(default=None, description="Reasoning text, or ciphertext when encrypted.")
    encrypted: bool = Field(default=False, description="True when content is opaque (redacted/encrypted).")
    signature: str | None = Field(default=None, description="Provider signature that authenticates the block.")


class ContentPart(Model):
    """An OpenAI-style content part: `{"type": "text", "text": …}`, `image_url`, `input_audio`, `file` …"""

    model_config = ConfigDict(extra="allow")
    type: Annotated[str, Field(min_length=1)]

    @model_validator(mode="after")
    def _text_parts_have_text(self) -> ContentPart:
        if self.type == "text" and not isinstance(getattr(self, "text", None), str):
            raise ValueError("a part of type 'text' needs a string 'text'")
        return self


Content = str | list[ContentPart] | None


class MessageIn(_Strict):
    """A message as a client sends it (append_message). The server assigns `seq`."""

    schema_version: Literal[1] = SCHEMA_VERSION
    append_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Client idempotency key; a retry with the same key and payload returns the original seq. "
        "Generated when absent (then retries are not idempotent).",
    )
    role: Role
    content: Content = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    thinking: Thinking | None = None
    name: str | None = Field(default=None, description="Optional participant/tool name (OpenAI `name`).")
    created_at: datetime | None = Field(
        default=None, description="RFC 3339; kept as given (imports carry original times). Defaults to now."
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Accepted so that a message read from one session can be appended to another unchanged.
    session_id: str | None = Field(default=None, exclude=True)
    seq: int | None = Field(default=None, exclude=True)

    @field_validator("created_at")
    @classmethod
    def _aware_utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("must carry a time zone (RFC 3339, e.g. 2026-08-18T07:00:00Z)")
        try:
            value = value.astimezone(UTC)
        except OverflowError:  # its zone moves it past year 1 or 9999
            raise ValueError("must be from 1970-01-01 to 9999-12-31 (UTC)") from None
        if value.year < 1970:  # the database keeps 1970 to 9999 (migration 0031)
            raise ValueError("must be from 1970-01-01 to 9999-12-31 (UTC)")
        return value

    @field_validator("append_id")
    @classmethod
    def _storable_key(cls, value: str | None) -> str | None:
        # payload text has U+0000 replaced; an idempotency key is compared as sent, so it is refused
        if value is not None and "\x00" in value:
            raise ValueError("must not contain U+0000 (PostgreSQL text cannot hold it)")
        return value

    @field_serializer("created_at")
    def _rfc3339(self, value: datetime | None) -> str | None:
        return None if value is None else format_time(value)

    @model_validator(mode="after")
    def _role_rules(self) -> MessageIn:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("tool_call_id is required when role is 'tool'")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("tool_calls is only allowed when role is 'assistant'")
        return self

    def payload(self) -> dict[str, Any]:
        """The stored form: what the client said, without server-assigned fields or empty values."""
        return self.model_dump(mode="json", exclude_none=True)


class Message(Model):
    """A stored message as read back (read_session): the payload plus session_id and seq."""

    model_config = ConfigDict(extra="allow")
    schema_version: int = SCHEMA_VERSION
    session_id: str
    seq: int
    append_id: str
    role: Role
    content: Content = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    thinking: Thinking | None = None
    created_at: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    inherited_from: str | None = Field(
        default=None, description="For a fork: the ancestor session that holds this message."
    )


def format_time(value: datetime) -> str:
    value = value.astimezone(UTC)
    text = value.isoformat(timespec="microseconds" if value.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def parse_message(raw: Any, *, field: str = "message", max_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES) -> MessageIn:
    """Validate one raw message, turning pydantic's report into one `[invalid]` line naming the field."""
    if isinstance(raw, MessageIn):
        message = raw
    else:
        if not isinstance(raw, dict):
            raise Invalid(f"{field} must be a JSON object, got {type(raw).__name__}")
        try:
            message = MessageIn.model_validate(raw)
        except ValidationError as exc:
            raise Invalid(describe_validation_error(exc, prefix=field)) from None
    if max_bytes is not None:  # None: the caller checks the size of what it stores
        payload = message.payload()
        size = len(json.dumps(payload, ensure_ascii=False).encode())
        if size > max_bytes:
            raise Invalid(size_error(payload, field=field, size=size, max_bytes=max_bytes))
    return message


def size_error(payload: dict[str, Any], *, field: str, size: int, max_bytes: int) -> str:
    """`[invalid]` text for an oversized message, naming its largest field."""
    largest = max(payload, key=lambda key: len(json.dumps(payload[key], ensure_ascii=False).encode()))
    return (f"{field}.{largest} makes the message {size} bytes, over the limit of {max_bytes} bytes "
            "(setting max_message_bytes)")


def describe_validation_error(exc: ValidationError, *, prefix: str) -> str:
    parts = []
    errors = exc.errors()
    # In a union (content: str | parts) report the branch the input was aimed at, not every branch.
    specific = [e for e in errors if e["type"] not in ("string_type", "list_type", "none_required")]
    errors = specific or errors
    for error in errors[:3]:
        error["loc"] = tuple(p for p in error["loc"] if not _is_union_tag(p))
        location = ".".join(str(p) for p in (prefix, *error["loc"]) if p != "")
        message = error["msg"].removeprefix("Value error, ").replace("Input should be", "must be")
        if message.split(" ", 1)[0] in MessageIn.model_fields:  # a model-level rule names its field first
            parts.append(f"{location}.{message}")
            continue
        if error["type"] == "literal_error" and error["loc"] and error["loc"][-1] == "role":
            message = "must be one of " + ", ".join(ROLES)
        if error["type"] == "extra_forbidden":
            message = "is not a field of the neutral message (put extra data under metadata)"
        parts.append(f"{location} {message}")
    more = len(errors) - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _is_union_tag(part: object) -> bool:
    return isinstance(part, str) and (part in ("str", "none") or "[" in part)


def json_schema() -> dict[str, Any]:
    schema = MessageIn.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "mcp-memory neutral message, schema_version 1"
    return schema


# sessions as agent adapters read and write them ------------------------------------------------
@dataclass
class MappingReport:
    """What a conversion could not carry as-is, with counts. Empty dropped == nothing lost."""

    agent: str
    direction: Literal["read", "write"]
    dropped: Counter[str] = field(default_factory=Counter)
    transformed: Counter[str] = field(default_factory=Counter)
    synthesized: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def drop(self, item: str, count: int = 1) -> None:
        self.dropped[item] += count

    def transform(self, item: str, count: int = 1) -> None:
        self.transformed[item] += count

    def synthesize(self, item: str, count: int = 1) -> None:
        self.synthesized[item] += count

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def merge(self, other: MappingReport) -> None:
        self.dropped.update(other.dropped)
        self.transformed.update(other.transformed)
        self.synthesized.update(other.synthesized)
        for text in other.notes:
            self.note(text)

    @property
    def lossless(self) -> bool:
        return not self.dropped

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "direction": self.direction,
            "dropped": dict(sorted(self.dropped.items())),
            "transformed": dict(sorted(self.transformed.items())),
            "synthesized": dict(sorted(self.synthesized.items())),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MappingReport:
        """The report `to_dict` gave (as results carry it)."""
        return cls(agent=data["agent"], direction=data["direction"], dropped=Counter(data.get("dropped", {})),
                   transformed=Counter(data.get("transformed", {})),
                   synthesized=Counter(data.get("synthesized", {})), notes=list(data.get("notes", [])))

    def render(self) -> list[str]:
        """Human-readable lines for the CLI."""
        lines = []
        for label, counts in (
            ("dropped", self.dropped),
            ("transformed", self.transformed),
            ("synthesized", self.synthesized),
        ):
            for item, count in sorted(counts.items()):
                lines.append(f"  {label:<11} {count:>6} × {item}")
        lines.extend(f"  note: {text}" for text in self.notes)
        return lines or ["  nothing dropped, transformed or synthesized"]


@dataclass
class NeutralSession:
    """One conversation in neutral form, as read from (or to be written to) an agent."""

    agent: str
    native_id: str
    messages: list[MessageIn]
    meta: dict[str, Any] = field(default_factory=dict)  # title, cwd, model, created_at, native, …
    report: MappingReport | None = None
    parent_native_id: str | None = None  # sub-agent / side-chain / child session …
    parent_tool_call_id: str | None = None  # … and the tool call in the parent that spawned it
    source_path: Path | None = None
