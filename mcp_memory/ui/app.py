"""The read-only review pages at /ui (Starlette + Jinja2, server-rendered, no script).

Every page runs as the signed-in token's database role (the REST gate, mcp_memory/http/app.py), so
row-level security decides what it shows. Content is escaped by Jinja2's autoescape, Markdown is
sanitized (render.py), and every response carries a strict Content-Security-Policy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core.service import Service
from ..errors import McpMemoryError
from ..http.errors import status_of
from ..security.tokens import Unauthorized
from . import auth, owner, pages

if TYPE_CHECKING:
    from ..http.gate import Gate

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; font-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff", "referrer-policy": "same-origin",
           "x-frame-options": "DENY", "cache-control": "no-store", "cross-origin-opener-policy": "same-origin"}
STATIC = Path(__file__).parent / "static"

_env = Environment(loader=PackageLoader("mcp_memory.ui", "templates"), autoescape=select_autoescape(default=True),
                   trim_blocks=True, lstrip_blocks=True)


class SecurityHeaders:
    """Adds HEADERS to every response of the UI (pages, errors, static files)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.encode(), v.encode()) for k, v in HEADERS.items() if k.encode() not in present]
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)


def html(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(_env.get_template(template).render(**context), status_code=status)


def _sign_in_redirect(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    response = RedirectResponse(f"/ui/sign-in?next={auth.safe_next(target)}", status_code=303)
    auth.clear_cookie(response, request)
    owner.clear_cookie(response)  # a one-person cookie from before a restart no longer signs in
    return response


PageData = Callable[[Service, Request], dict[str, Any]]


async def _service(gate: Gate, sessions: auth.Sessions, owners: owner.OwnerSignIn | None,
                   request: Request) -> Service | None:
    """The signed-in browser's service: its session's token's, else the server's own (one-person mode)."""
    token = sessions.token_of(request)
    if token is not None:
        try:
            return await run_in_threadpool(auth.service_for, gate, token, gate.client_of(request))
        except Unauthorized:
            sessions.end_token(token)  # revoked or expired: its sessions end with it
            raise
    if owners is not None and owners.signed_in(request):
        return gate.registry.shared
    return None


def page(gate: Gate, sessions: auth.Sessions, template: str, data: PageData, nav: str,
         owners: owner.OwnerSignIn | None = None) -> Callable[[Request], Any]:
    async def handle(request: Request) -> Response:
        try:
            service = await _service(gate, sessions, owners, request)
            if service is None:
                return _sign_in_redirect(request)
            context = await run_in_threadpool(data, service, request)
        except Unauthorized:
            return _sign_in_redirect(request)
        except McpMemoryError as exc:
            return html("error.html", status_of(exc), error=exc, nav=nav)
        return html(template, nav=nav, **context)

    return handle


async def sign_in(request: Request, gate: Gate, sessions: auth.Sessions, one_person: bool = False) -> Response:
    next_url = auth.safe_next(request.query_params.get("next"))
    if request.method == "GET":
        return html("sign_in.html", next=next_url, error=None, nav="sign-in", one_person=one_person)
    if not auth.same_origin(request):
        return html("sign_in.html", 403, next=next_url, error="this form must be sent from this page (Origin)",
                    nav="sign-in", one_person=one_person)
    try:
        fields = await auth.form(request)
        token = fields.get("token", "").strip()
        await run_in_threadpool(auth.service_for, gate, token, gate.client_of(request))
    except McpMemoryError as exc:
        return html("sign_in.html", status_of(exc), next=next_url, error=str(exc), nav="sign-in",
                    one_person=one_person)
    response = RedirectResponse(auth.safe_next(fields.get("next")), status_code=303)
    auth.set_cookie(response, request, sessions.start(request, token))
    return response


async def sign_out(request: Request, sessions: auth.Sessions, owners: owner.OwnerSignIn | None = None) -> Response:
    if not auth.same_origin(request):
        return html("error.html", 403, error="sign-out must be sent from this page (Origin)", nav="")
    response = RedirectResponse("/ui/sign-in", status_code=303)
    sessions.end(request)
    auth.clear_cookie(response, request)
    if owners is not None:
        owners.sign_out(request)
        owner.clear_cookie(response)
    return response


async def owner_link(request: Request, owners: owner.OwnerSignIn) -> Response:
    """The one-time link of one-person mode: exchanged, once, for a session cookie."""
    session = owners.redeem(request.query_params.get("code", ""))
    if session is None:
        return html("error.html", 403, nav="sign-in", error=(
            "this sign-in link was already used or has expired (a link works once, for "
            f"{owner.LINK_SECONDS / 60:.0f} minutes): stop `mcp-memory ui` and run it again for a new one, "
            "or sign in with a token"))
    response = RedirectResponse("/ui/", status_code=303)
    owner.set_cookie(response, request, session)
    return response


def create_ui(gate: Gate, owners: owner.OwnerSignIn | None = None, *, machine: str | None = None) -> ASGIApp:
    """`owners`: one-person mode (mcp-memory ui on the embedded default, loopback only), else None.
    `machine`: this machine's name when the database is the embedded default (the host of the owner's writes)."""
    sessions = auth.Sessions()

    def query(request: Request) -> dict[str, str]:
        return dict(request.query_params)

    def sid(request: Request) -> str:
        return str(request.path_params["session_id"])

    async def signing_in(request: Request) -> Response:
        return await sign_in(request, gate, sessions, owners is not None)

    async def signing_out(request: Request) -> Response:
        return await sign_out(request, sessions, owners)

    routes = [
        Route("/", page(gate, sessions, "sessions.html", lambda s, r: pages.sessions_page(s, query(r), machine), "sessions",
                        owners)),
        Route("/sessions/{session_id}", page(gate, sessions, "session.html",
                                             lambda s, r: pages.session_page(s, sid(r), query(r)), "sessions",
                                             owners)),
        Route("/sessions/{session_id}/lineage", page(gate, sessions, "lineage.html",
                                                     lambda s, r: pages.lineage_page(s, sid(r)), "sessions", owners)),
        Route("/decisions", page(gate, sessions, "decisions.html", lambda s, r: pages.decisions_page(s, query(r)), "decisions",
                                 owners)),
        Route("/health", page(gate, sessions, "health.html", lambda s, r: pages.health_page(s), "health", owners)),
        Route("/sign-in", signing_in, methods=["GET", "POST"]),
        Route("/sign-out", signing_out, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]
    if owners is not None:
        signed_owner = owners

        async def exchanging(request: Request) -> Response:
            return await owner_link(request, signed_owner)

        routes.append(Route(owner.ROUTE, exchanging, methods=["GET"]))
    return SecurityHeaders(Starlette(routes=routes))
