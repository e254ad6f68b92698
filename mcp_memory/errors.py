"""One error hierarchy. Every transport maps these through one table (see `code`)."""

from __future__ import annotations

import logging
import secrets


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


class Retired(Unavailable):
    """A session whose messages are in a month that left the hot tables (README, "Partitions"): the
    hot store cannot serve it until it is restored from the archive."""


class ConfigError(McpMemoryError):
    """The configuration is wrong (bad TOML, missing keyring secret, …)."""

    code = "config"


class Internal(McpMemoryError):
    """Something unexpected (a bug, or a database error nobody mapped): the caller gets a short reason
    and an incident id; the server log has the traceback under the same id."""

    code = "internal"


def internal(exc: BaseException, log: logging.Logger) -> Internal:
    """The coded error a transport answers with when `exc` is not an McpMemoryError. Logs the
    traceback at ERROR with the incident id, so that the answer and the log line can be matched."""
    incident = secrets.token_hex(4)
    reason = _short_reason(exc)
    log.error("internal error, incident %s: %s", incident, reason, exc_info=exc)
    return Internal(f"{reason} (incident {incident}; the server log has the details)")


def _short_reason(exc: BaseException) -> str:
    """What went wrong, in one short line: a database error by its SQLSTATE and class (its message may
    quote stored values), anything else by its class and the first line of its message."""
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate:
        return f"unexpected database error {sqlstate} ({type(exc).__name__})"
    first = (str(exc).strip().splitlines() or [""])[0]
    first = first if len(first) <= 120 else first[:117] + "…"
    return f"unexpected {type(exc).__name__}" + (f": {first}" if first else "")
