"""Sign-in for the review pages: the REST bearer token, exchanged for an opaque session.

The token is checked by the REST app's own gate (mcp_memory/http/app.py: token → role → rate
limit → the role's service), so the pages see exactly what the same token sees over REST. The
browser never holds the token: it gets a random session id (HttpOnly, SameSite=Strict, Path=/ui,
named after the server's port so that two servers on one host keep apart), which this process maps
to the token in memory, for the Host it was issued to, for at most SESSION_SECONDS. Browsers send
a 127.0.0.1 cookie to every port of that host: what another port's server could read is a session
id that works only on these pages, only until it expires or is signed out — not a token that works
on REST and /mcp for as long as it lives. Only SHA-256 digests of the ids are kept: a restart signs
everyone out. The only state-changing requests are the sign-in and sign-out POSTs; both must come
from this origin.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import Response

from ..core.service import Service
from ..errors import Invalid

if TYPE_CHECKING:
    from ..http.gate import Gate

COOKIE_PREFIX = "mm_ui_session_"  # + the server's port
MAX_FORM_BYTES = 4096
SESSION_SECONDS = 8 * 3600.0
MAX_SESSIONS = 4096  # signed-in browsers at once (the oldest is signed out beyond)
SESSION_CHARS = 43  # secrets.token_urlsafe(32)


def cookie_name(request: Request) -> str:
    server = request.scope.get("server")
    return f"{COOKIE_PREFIX}{server[1] if server else 0}"


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", errors="replace")).digest()


class Sessions:
    """Session id (by digest) → (token, the Host it was issued to, expiry), least recently used out."""

    def __init__(self, *, seconds: float = SESSION_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self._sessions: OrderedDict[bytes, tuple[str, str, float]] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, request: Request, token: str) -> str:
        """A new session id for a verified token."""
        session = secrets.token_urlsafe(32)
        with self._lock:
            self._sessions[_digest(session)] = (token, request.url.netloc, self.clock() + self.seconds)
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session

    def token_of(self, request: Request) -> str | None:
        """The token of this browser's session; None when it has none, or one that expired, was signed
        out, or was issued for another Host."""
        value = request.cookies.get(cookie_name(request))
        if not value or len(value) != SESSION_CHARS:
            return None
        key = _digest(value)
        with self._lock:
            entry = self._sessions.get(key)
            if entry is None:
                return None
            token, host, expires = entry
            if self.clock() > expires:
                del self._sessions[key]
                return None
            self._sessions.move_to_end(key)
        return token if host == request.url.netloc else None

    def end(self, request: Request) -> None:
        value = request.cookies.get(cookie_name(request))
        if value:
            with self._lock:
                self._sessions.pop(_digest(value), None)

    def end_token(self, token: str) -> None:
        """Sign out every session of a token the gate no longer accepts."""
        with self._lock:
            for key in [key for key, entry in self._sessions.items() if entry[0] == token]:
                del self._sessions[key]


def service_for(gate: Gate, token: str, client: str) -> Service:
    """The token's service, through the REST gate: verified first, then the role's rate limit (a forged
    cookie is charged to its address and claimed role, never to the real token's requests)."""
    return gate.verify(token, client)


def same_origin(request: Request) -> bool:
    """A POST is accepted only with an Origin header naming this server (no cross-site forms)."""
    origin = request.headers.get("origin")
    if not origin or origin == "null":
        return False
    parts = urlsplit(origin)
    return f"{parts.scheme}://{parts.netloc}" == f"{request.url.scheme}://{request.url.netloc}"


async def form(request: Request) -> dict[str, str]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise Invalid(f"form is larger than {MAX_FORM_BYTES} bytes")
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {key: values[0] for key, values in fields.items()}


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a path under /ui only (no open redirect)."""
    if value and value.startswith("/ui/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/ui/"


def set_cookie(response: Response, request: Request, session: str) -> None:
    response.set_cookie(cookie_name(request), session, httponly=True, samesite="strict", path="/ui",
                        max_age=int(SESSION_SECONDS), secure=request.url.scheme == "https")


def clear_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(cookie_name(request), path="/ui", httponly=True, samesite="strict")
