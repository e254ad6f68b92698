"""Sign-in for the review pages: the REST bearer token, kept in an HttpOnly, SameSite=Strict cookie.

The token is checked by the REST app's own gate (mcp_memory/http/app.py: token → role → rate
limit → the role's service), so the pages see exactly what the same token sees over REST. The only
state-changing requests are the sign-in and sign-out POSTs; both must come from this origin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import Response

from ..core.service import Service
from ..errors import Invalid

if TYPE_CHECKING:
    from ..http.gate import Gate

COOKIE = "mm_ui_token"
MAX_FORM_BYTES = 4096


def token_of(request: Request) -> str | None:
    value = request.cookies.get(COOKIE)
    return value or None


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


def set_cookie(response: Response, request: Request, token: str) -> None:
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/ui",
                        secure=request.url.scheme == "https")


def clear_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
