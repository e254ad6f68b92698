"""One error hierarchy. Every transport maps these through one table (see `code`)."""

from __future__ import annotations


class McpMemoryError(Exception):
    """Base class; `code` is the stable bracketed code of README, MCP tools."""

    code = "error"

    def __str__(self) -> str:  # the message without the code; transports add `[code]`
        return super().__str__()

    def render(self) -> str:
        return f"[{self.code}] {self}"


class Invalid(McpMemoryError):
    code = "invalid"


class NotFound(McpMemoryError):
    code = "not_found"


class Conflict(McpMemoryError):
    code = "conflict"


class Forbidden(McpMemoryError):
    code = "forbidden"


class Unauthorized(Forbidden):
    """Credentials not accepted: no token, not a token, or one that is revoked, expired or unknown
    (REST 401). A `[forbidden]` error, never `[unavailable]`: retrying does not make it valid."""


class Unavailable(McpMemoryError):
    code = "unavailable"


class ConfigError(McpMemoryError):
    """The configuration is wrong (bad TOML, missing keyring secret, …)."""

    code = "config"
