"""Bearer tokens → a core service that runs as the token's database role, on one shared pool.

The bearer token is the one `token create` printed. Its SHA-256 digest is checked by the database
against the one `access_tokens` holds for its role (mm_check_token: the role must still be allowed
to log in; the server's own login, a gateway, reads no table), and a verified token is remembered for
`recheck_seconds` (by its digest), so that a revoked token stops working within that time. The
digest check is cached; the proof is not: each transaction proves the token again (mm_enter,
migration 0020, store/roles.py), so the role's service keeps its token in memory.

Every request of every token runs on ONE pool of the server's own connections (`[http] pool_max`):
each transaction starts with `mm_enter(<token>)` (its proof, which names the caller to every policy and write function), so
row-level security and the write functions see the token's role exactly as on a connection that
logged in with it, and the number of tokens never bounds the number of
connections: 200 tokens share the same few. Long-poll reads (`wait_seconds`) of every token share
the server's one append listener (one LISTEN connection, woken notifications fanned out in memory).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace

from ..config import Settings
from ..core.service import Service
from ..security import tokens
from ..security.tokens import Unauthorized
from ..store.roles import RoleDatabase, token_accepted

ServiceFactory = Callable[[Settings], Service]
REFUSED = "the token was not accepted (revoked, expired or mistyped)"


def bearer(header: str | None) -> str:
    """The token of an `Authorization: Bearer …` header."""
    scheme, _, value = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unauthorized("send Authorization: Bearer <token> (a token from `mcp-memory token create`)")
    return value.strip()


class TokenRegistry:
    """Verified tokens (by digest, least recently used out) and one service per role, all on the
    shared pool of `base_dsn` (the server's own login)."""

    def __init__(self, settings: Settings, base_dsn: str, factory: ServiceFactory, *, recheck_seconds: float = 30.0,
                 max_tokens: int = 4096, pool_max: int = 8, clock: Callable[[], float] = time.monotonic) -> None:
        self.recheck_seconds = recheck_seconds
        self.max_tokens = max_tokens
        self.clock = clock
        # the server proves each token itself (RoleDatabase): its own login is no token
        shared = replace(settings, dsn=base_dsn, dsn_source="flag", pool_min=0, pool_max=pool_max, auto_migrate=False,
                         gateway=False)
        self.shared = factory(shared)
        self._verified: OrderedDict[bytes, tuple[str, float]] = OrderedDict()
        self._services: OrderedDict[str, Service] = OrderedDict()
        self._lock = threading.Lock()

    def role_of(self, token: str) -> str:
        role = tokens.parse_token(token)
        if role is None:
            raise Unauthorized("not an mcp-memory token (expected mmt.<role>.<secret>)")
        return role

    def is_fresh(self, token: str) -> bool:
        """True when the token was verified within `recheck_seconds` (no database work needed)."""
        key = tokens.token_digest(token)
        with self._lock:
            entry = self._verified.get(key)
        return entry is not None and self.clock() - entry[1] < self.recheck_seconds

    def was_verified(self, token: str) -> bool:
        """True when this very token was verified (and not refused since), however long ago: only its
        holder can show it, so it is never slowed down by failures charged to its address and role."""
        key = tokens.token_digest(token)
        with self._lock:
            return key in self._verified

    def service_for(self, token: str, *, force: bool = False) -> Service:
        """The service of this token's role, the token verified within `recheck_seconds` (now, if `force`)."""
        role = self.role_of(token)
        key = tokens.token_digest(token)
        if force or not self.is_fresh(token):
            self._verify(role, key)
        return self._service(role, token)

    def _verify(self, role: str, key: bytes) -> None:
        if not token_accepted(self.shared.db, role, key):
            with self._lock:
                self._verified.pop(key, None)
            raise Unauthorized(REFUSED)
        with self._lock:
            self._verified[key] = (role, self.clock())
            self._verified.move_to_end(key)
            while len(self._verified) > self.max_tokens:
                self._verified.popitem(last=False)

    def _service(self, role: str, token: str) -> Service:
        evicted: list[Service] = []
        with self._lock:
            service = self._services.get(role)
            if service is not None and isinstance(service.db, RoleDatabase) and service.db.token != token:
                service.db.token = token  # the role's token as verified just now
            if service is None:
                base = self.shared
                # one LISTEN for the whole server: the shared service's, on its own login (LISTEN needs
                # no privilege); each role still asks for its channel keys itself
                service = Service(RoleDatabase(base.db, role, token), cleaner=base.cleaner, embedder=base.embedder,
                                  append_listener=base.appends.listener)
                self._services[role] = service
            self._services.move_to_end(role)
            while len(self._services) > self.max_tokens:
                evicted.append(self._services.popitem(last=False)[1])
        for old in evicted:
            old.db.close()  # its indexer only: the pool is shared
        return service

    def close(self) -> None:
        with self._lock:
            services, self._services = list(self._services.values()), OrderedDict()
            self._verified.clear()
        for service in services:
            service.db.close()
        self.shared.db.close()
