"""Database passwords and host tokens: from env or the OS keyring, never printed in full."""

from __future__ import annotations

import logging
import re

from psycopg.conninfo import conninfo_to_dict, make_conninfo

log = logging.getLogger(__name__)

KEYRING_SERVICE = "mcp-memory"
_URI_PASSWORD = re.compile(r"(postgres(?:ql)?://[^:/@\s]*:)([^@\s]*)(@)")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.I)


def mask_dsn(dsn: str) -> str:
    """The DSN with any password replaced by ***, safe to print and log."""
    masked = _URI_PASSWORD.sub(lambda m: m.group(1) + ("***" if m.group(2) else "") + m.group(3), dsn)
    return _KV_PASSWORD.sub(r"\1***", masked)


def keyring_account(dsn: str) -> str:
    """The keyring account name for a DSN: user@host:port/dbname (no password)."""
    params = conninfo_to_dict(dsn)
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    return f"{params.get('user', '')}@{host}:{port}/{params.get('dbname', '')}"


def keyring_password(dsn: str) -> str | None:
    """The stored password/token for this DSN, or None (no keyring backend is not an error)."""
    try:
        import keyring
        from keyring.errors import KeyringError
    except ImportError:  # pragma: no cover - keyring is a dependency
        return None
    try:
        return keyring.get_password(KEYRING_SERVICE, keyring_account(dsn))
    except (KeyringError, RuntimeError, OSError) as exc:
        log.debug("keyring unavailable: %s", exc)
        return None


def with_password(dsn: str, password: str | None) -> str:
    """Add a password to a DSN that has none; a DSN's own password wins."""
    params = conninfo_to_dict(dsn)
    if params.get("password"):
        return dsn
    if password is None:
        password = keyring_password(dsn)
    if password is None:
        return dsn
    return make_conninfo(dsn, password=password)
