"""The gate every protected request passes (REST, `/mcp` and the `/ui` sign-in): token verification,
then the token's rate limit. Its own module, so that the REST app, the MCP mount and the review
pages all depend on it and none of them on another."""

from __future__ import annotations

import threading
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..core.service import Service
from ..errors import Unavailable
from ..security.tokens import Unauthorized
from .auth import TokenRegistry, bearer
from .errors import RateLimited
from .proxies import TrustedProxies
from .ratelimit import RateLimiter
from .routes import Call, Endpoint

ADDRESS_SHARE = 4  # an address may fail this many (address, role) budgets in all before it is slowed down
LANE_WAIT_SECONDS = 2.0  # an over-budget token waits this long for the one check at a time, then 429


class Gate:
    """What every request on a protected route passes, in this order:

    1. the token is verified (a verification cached within `recheck_seconds` costs no database work);
    2. only then is its role rate-limited, so a forged token never spends a real token's requests.

    A failed verification is charged to (client address, claimed role) and to the address as a whole
    (ADDRESS_SHARE times that budget). Once either is spent, a token from there that the registry has
    not verified before goes through the over-budget lane: one database check at a time for the whole
    server (waiting at most LANE_WAIT_SECONDS, else 429), a failure answered 429. So a flood of forged
    tokens costs at most one check at a time, and a real token first seen during the flood (same
    address, same role) is still checked, in its turn, and served: nothing tells it apart from the
    forgeries but the check itself. A token verified before skips the budgets altogether. The client
    address is the peer's, or X-Forwarded-For's client when the peer is a trusted proxy (proxies.py).
    A string that is not a token at all costs no database work and is answered 401 without being
    charged."""

    def __init__(self, registry: TokenRegistry, limiter: RateLimiter, failures: RateLimiter, *,
                 address_failures: RateLimiter | None = None, proxies: TrustedProxies | None = None) -> None:
        self.registry = registry
        self.limiter = limiter
        self.failures = failures
        self.address_failures = address_failures or RateLimiter(failures.rate * ADDRESS_SHARE,
                                                                failures.burst * ADDRESS_SHARE)
        self.proxies = proxies or TrustedProxies()
        self._lane = threading.Lock()  # the over-budget lane (verify runs on worker threads)

    def client_of(self, request: Request) -> str:
        peer = request.client.host if request.client else "unknown"
        forwarded = ", ".join(request.headers.getlist("x-forwarded-for")) or None
        return self.proxies.client(peer, forwarded)

    def authenticate(self, header: str | None, client: str) -> tuple[str, Service]:
        """(token, service) of a verified bearer token; runs in a worker thread (it may query)."""
        token = bearer(header)
        return token, self.verify(token, client)

    def verify(self, token: str, client: str) -> Service:
        """The service of a verified token, after its role's rate limit (REST, /mcp and the /ui sign-in)."""
        role = self.registry.role_of(token)
        service = self._checked(token, role, client)
        wait = self.limiter.take(role)
        if wait:
            raise RateLimited(f"too many requests for token {role}; retry in {wait} s", retry_after=wait)
        return service

    def _checked(self, token: str, role: str, client: str) -> Service:
        failures_key = f"{client} {role}"
        over = 0 if self.registry.was_verified(token) else \
            max(self.failures.blocked(failures_key), self.address_failures.blocked(client))
        refused = RateLimited(f"too many failed authentications for token {role} from {client}; retry in "
                              f"{max(over, 1)} s", retry_after=max(over, 1))
        if over and not self._lane.acquire(timeout=LANE_WAIT_SECONDS):
            raise refused
        try:
            return self.registry.service_for(token)
        except Unauthorized:
            self.failures.take(failures_key)
            self.address_failures.take(client)
            if over:
                raise refused from None
            raise
        finally:
            if over:
                self._lane.release()

    async def admit(self, request: Request) -> tuple[str, Service]:
        return await run_in_threadpool(self.authenticate, request.headers.get("authorization"),
                                       self.client_of(request))

    def run(self, token: str, endpoint: Endpoint, call: Call) -> Any:
        service = self.registry.service_for(token)
        try:
            return endpoint.run(service, call)
        except Unavailable:
            self.registry.service_for(token, force=True)  # Unauthorized if the token was revoked meanwhile
            raise
