"""REST errors: the one table that maps the error hierarchy to HTTP statuses (STYLE.md 6).

Body: `{"error": {"code": "...", "message": "..."}}`; the code is the same as the bracketed code of
the MCP transport.
"""

from __future__ import annotations

import logging

from starlette.responses import JSONResponse

from ..errors import ConfigError, Conflict, Forbidden, Invalid, McpMemoryError, NotFound, Unavailable, internal
from ..security.tokens import Unauthorized

log = logging.getLogger(__name__)


class TooLarge(McpMemoryError):
    code = "too_large"


class RateLimited(McpMemoryError):
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Busy(Unavailable):
    """The server is at a bound it keeps (big bodies being read at once): retry after `retry_after` s."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TimedOut(McpMemoryError):
    code = "timeout"


STATUS: dict[type[McpMemoryError], int] = {
    Invalid: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TimedOut: 408,
    TooLarge: 413,
    RateLimited: 429,
    Unavailable: 503,
    ConfigError: 503,  # the server is misconfigured: the client can only retry later
}


def status_of(exc: McpMemoryError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def error_response(exc: McpMemoryError) -> JSONResponse:
    retry_after = getattr(exc, "retry_after", None)
    headers = {"Retry-After": str(retry_after)} if isinstance(retry_after, int) else {}
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = 'Bearer realm="mcp-memory"'
    status = status_of(exc)
    if status >= 500:
        log.warning("%s", exc.render())
    return JSONResponse({"error": {"code": exc.code, "message": str(exc)}}, status_code=status, headers=headers)


def internal_error(exc: Exception) -> JSONResponse:
    """A bug, not a user error: logged with its traceback under an incident id; the client gets the
    short reason and that id."""
    coded = internal(exc, log)
    return JSONResponse({"error": {"code": coded.code, "message": str(coded)}}, status_code=500)
