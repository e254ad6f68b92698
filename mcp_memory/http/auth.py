"""Bearer tokens → a core service that runs as the token's database role.

The bearer token is the one `token create` printed. Each token gets its own small connection pool
that logs in as its role with the token as password, so PostgreSQL checks the credential and
row-level security limits every request to the token's projects; nothing of the token is kept in
clear (the database holds a SCRAM verifier and a SHA-256 digest). A token is re-verified after
`recheck_seconds`, so a revoked one stops working within that time even on a warm pool.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..config import Settings
from ..core.service import Service
from ..errors import Unavailable
from ..security import tokens
from ..security.tokens import Unauthorized

ServiceFactory = Callable[[Settings], Service]


def bearer(header: str | None) -> str:
    """The token of an `Authorization: Bearer …` header."""
    scheme, _, value = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unauthorized("send Authorization: Bearer <token> (a token from `mcp-memory token create`)")
    return value.strip()


@dataclass
class _Entry:
    service: Service
    checked_at: float


class TokenRegistry:
    """Per-token services, least recently used first out (each holds a pool of ≤ `pool_max`)."""

    def __init__(self, settings: Settings, base_dsn: str, factory: ServiceFactory, *, recheck_seconds: float = 30.0,
                 max_tokens: int = 64, pool_max: int = 2, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.base_dsn = base_dsn
        self.factory = factory
        self.recheck_seconds = recheck_seconds
        self.max_tokens = max_tokens
        self.pool_max = pool_max
        self.clock = clock
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def role_of(self, token: str) -> str:
        role = tokens.parse_token(token)
        if role is None:
            raise Unauthorized("not an mcp-memory token (expected mmt.<role>.<secret>)")
        return role

    def service_for(self, token: str, *, force: bool = False) -> Service:
        """The service of this token, verified within the last `recheck_seconds` (now, if `force`)."""
        role = self.role_of(token)
        key = hashlib.sha256(token.encode()).digest()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is not None and not force and self.clock() - entry.checked_at < self.recheck_seconds:
            return entry.service
        service = entry.service if entry is not None else self._new_service(role, token)
        try:
            tokens.verify(service.db, token)
        except (Unauthorized, Unavailable):
            self._drop(key, service)
            raise
        self._keep(key, _Entry(service, self.clock()))
        return service

    def _new_service(self, role: str, token: str) -> Service:
        per_token = replace(self.settings, dsn=tokens.role_dsn(self.base_dsn, role), dsn_source="flag",
                            password=token, pool_min=0, pool_max=self.pool_max, auto_migrate=False)
        return self.factory(per_token)

    def _keep(self, key: bytes, entry: _Entry) -> None:
        evicted = []
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_tokens:
                evicted.append(self._entries.popitem(last=False)[1].service)
        for service in evicted:
            service.db.close()

    def _drop(self, key: bytes, service: Service) -> None:
        with self._lock:
            self._entries.pop(key, None)
        service.db.close()

    def close(self) -> None:
        with self._lock:
            entries, self._entries = list(self._entries.values()), OrderedDict()
        for entry in entries:
            entry.service.db.close()
