"""`mcp-memory serve-http`: wiring (settings → token registry → app) and the uvicorn run.

```toml
[http]
max_body_bytes = 33554432   # 413 above this
rate_limit = 20             # requests per second per token (0: no limit); 429 + Retry-After
burst = 40
recheck_seconds = 30        # a revoked token stops working within this time
auth_failures_per_second = 1  # failed authentications per (client address, claimed role) (then 429)
auth_failure_burst = 20
pool_max = 8                # database connections shared by every token (each transaction proves its token)
trusted_proxies = []        # X-Forwarded-For is honoured only from these addresses / CIDR networks
header_seconds = 10         # a connection that sends no complete request head in this time is closed
body_seconds = 60           # a body not received in full within this time: 408
max_connections = 10000     # open connections at most (kept 128 below the open-file limit, raised at start)
big_bodies_at_once = 2      # bodies over 1 MiB read and decoded at once; later ones wait (then 503)
```
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..errors import ConfigError, Invalid
from ..store.db import Database
from ..store.security_store import SecurityStore
from ..wiring import build
from .app import HttpOptions, create_app
from .auth import TokenRegistry
from .guard import Guard, connection_cap, guarded_protocol, raise_fd_limit, tune_malloc
from .proxies import parse_networks

if TYPE_CHECKING:
    from ..ui.owner import OwnerSignIn

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def http_options(settings: Settings, host: str) -> HttpOptions:
    section: Any = settings.raw.get("http", {})
    if not isinstance(section, dict):
        raise ConfigError("config: [http] must be a table")
    defaults = HttpOptions()
    values: dict[str, Any] = {"host": host}
    for key, kind in (("max_body_bytes", int), ("rate_limit", float), ("burst", int), ("recheck_seconds", float),
                      ("auth_failures_per_second", float), ("auth_failure_burst", int), ("pool_max", int),
                      ("max_waits", int), ("header_seconds", float), ("body_seconds", float),
                      ("max_connections", int), ("big_bodies_at_once", int)):
        value = section.get(key, getattr(defaults, key))
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"config: http.{key} must be a number ≥ 0, got {value!r}")
        values[key] = kind(value)
    metrics = section.get("metrics", defaults.metrics)
    if not isinstance(metrics, bool):
        raise ConfigError(f"config: http.metrics must be true or false, got {metrics!r}")
    values["metrics"] = metrics
    # the embedded server takes only this machine's processes: the owner's own writes come from here
    values["machine"] = socket.gethostname() if settings.embedded else None
    proxies = section.get("trusted_proxies", [])
    if not isinstance(proxies, list):
        raise ConfigError(f"config: http.trusted_proxies must be a list of addresses or CIDR networks, got {proxies!r}")
    try:
        values["trusted_proxies"] = parse_networks(proxies)
    except ValueError as exc:
        raise ConfigError(f"config: {exc}") from None
    return HttpOptions(**values)


def tokens_configured(db: Database) -> int:
    with db.transaction() as conn:
        return SecurityStore(conn).token_count()


def login_is_owner(db: Database) -> bool:
    with db.transaction() as conn:
        return SecurityStore(conn).login_is_owner()


def prepare(settings: Settings, host: str, *, as_owner: bool = True,
            owners: OwnerSignIn | None = None) -> tuple[Any, TokenRegistry]:
    """The app and its registry; refuses a non-loopback bind while no token exists, and the owner's
    login unless `as_owner` (the CLI asks for --as-owner; a gateway login is the rule). `owners`: the
    review pages' one-person mode, refused unless bound to loopback."""
    if owners is not None and not is_loopback(host):
        raise Invalid(f"one-person sign-in is for loopback only, not {host}: sign in with a token")
    db = Database(settings, application_name="mcp-memory serve-http")
    try:
        db.ensure_schema()
        base_dsn = db.dsn()
        if not as_owner and login_is_owner(db):
            raise Invalid("serve-http refuses to run as the database owner (a host serving REST would hold full "
                          "control of every project): create a gateway login with `mcp-memory token gateway "
                          "--name <name>` and start serve-http with its DSN, or pass --as-owner")
        if not is_loopback(host) and tokens_configured(db) == 0:
            raise Invalid(f"refusing to listen on {host} without tokens: create one with `mcp-memory token create` "
                          "first (or bind 127.0.0.1)")
    finally:
        db.close()
    options = http_options(settings, host)
    registry = TokenRegistry(settings, base_dsn, lambda s: build(s, application_name="mcp-memory http", local=False),
                             recheck_seconds=options.recheck_seconds, pool_max=max(1, options.pool_max))
    return create_app(registry, options, owners), registry


def serve(settings: Settings, *, host: str, port: int, as_owner: bool = False,
          owners: OwnerSignIn | None = None) -> None:
    import uvicorn

    app, registry = prepare(settings, host, as_owner=as_owner, owners=owners)
    options = http_options(settings, host)
    tune_malloc()
    cap = connection_cap(options.max_connections, raise_fd_limit())
    log.warning("mcp-memory REST on http://%s:%d (OpenAPI at /openapi.json, MCP at /mcp)", host, port)
    try:
        uvicorn.run(app, **uvicorn_options(options, host, port, cap))
    finally:
        registry.close()


def uvicorn_options(options: HttpOptions, host: str, port: int, cap: int) -> dict[str, Any]:
    """How serve-http runs uvicorn: on the guarded h11 protocol (guard.py: header timeout, connection
    cap), with at most `cap` requests in flight."""
    guard = Guard(header_seconds=max(options.header_seconds, 0.1), max_connections=cap)
    # proxy_headers off: uvicorn would otherwise believe X-Forwarded-For from loopback; the app
    # reads it itself, from [http] trusted_proxies only (proxies.py). limit_concurrency past the cap:
    # uvicorn counts connections too, and the guard already bounds them (a 503 would hit whole requests)
    return {"host": host, "port": port, "log_level": "warning", "server_header": False, "proxy_headers": False,
            "http": guarded_protocol(guard), "limit_concurrency": cap + 1, "backlog": min(cap, 4096),
            "timeout_keep_alive": 5}
