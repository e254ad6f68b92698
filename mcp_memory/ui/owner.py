"""One-person mode: `mcp-memory ui` on the embedded default, bound to loopback, signs its own user in
without a token.

Loopback is not proof of identity (every local account can reach 127.0.0.1), so the process that
serves the pages mints a one-time link and hands it only to the user who started it (printed on
stderr, opened in their browser). The link holds 256 random bits, works once, and expires after
`LINK_SECONDS`; using it sets a session cookie (HttpOnly, SameSite=Strict, path /ui) whose value is
random too. Only SHA-256 digests of both are kept, in memory: a restart signs everyone out.
Pages signed in this way run on the server's own login (the database owner on the embedded default),
exactly as the CLI of that user does.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response

COOKIE = "mm_ui_owner"
ROUTE = "/owner-link"  # under /ui
LINK_SECONDS = 300.0  # also said by mcp_memory/commands/ui.py (LINK_MINUTES)
MAX_SESSIONS = 64  # browsers signed in at once (the oldest is signed out beyond)
CODE_CHARS = 43  # secrets.token_urlsafe(32)


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", errors="replace")).digest()


class OwnerSignIn:
    """The one outstanding link and the signed-in browsers of one server process."""

    def __init__(self, *, link_seconds: float = LINK_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.link_seconds = link_seconds
        self.clock = clock
        self._link: tuple[bytes, float] | None = None
        self._sessions: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    def new_link(self) -> str:
        """A fresh one-time code (the previous one, if unused, stops working)."""
        code = secrets.token_urlsafe(32)
        with self._lock:
            self._link = (_digest(code), self.clock() + self.link_seconds)
        return code

    def redeem(self, code: str) -> str | None:
        """The value of a new session cookie for the outstanding code, which is used up; None for a
        wrong, used or expired code."""
        if len(code) != CODE_CHARS:
            return None
        with self._lock:
            link = self._link
            if link is None or not hmac.compare_digest(link[0], _digest(code)):
                return None
            self._link = None  # used, or expired: either way it never works again
            if self.clock() > link[1]:
                return None
            session = secrets.token_urlsafe(32)
            self._sessions[_digest(session)] = None
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session

    def signed_in(self, request: Request) -> bool:
        value = request.cookies.get(COOKIE)
        if not value or len(value) != CODE_CHARS:
            return False
        with self._lock:
            return _digest(value) in self._sessions

    def sign_out(self, request: Request) -> None:
        value = request.cookies.get(COOKIE)
        if value:
            with self._lock:
                self._sessions.pop(_digest(value), None)


def link_url(base: str, code: str) -> str:
    return f"{base}/ui{ROUTE}?code={code}"


def set_cookie(response: Response, request: Request, value: str) -> None:
    response.set_cookie(COOKIE, value, httponly=True, samesite="strict", path="/ui",
                        secure=request.url.scheme == "https")


def clear_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
