"""Database passwords and host tokens: from env, the OS keyring, or (where no keyring backend
exists, e.g. headless Linux) a 0600 JSON file in the config dir; never printed in full."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

log = logging.getLogger(__name__)

KEYRING_SERVICE = "mcp-memory"
_URI_PASSWORD = re.compile(r"(postgres(?:ql)?://[^:/@\s]*:)([^@\s]*)(@)")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def mask_dsn(dsn: str) -> str:
    """The DSN with any password replaced by ***, safe to print and log."""
    masked = _URI_PASSWORD.sub(lambda m: m.group(1) + ("***" if m.group(2) else "") + m.group(3), dsn)
    return _KV_PASSWORD.sub(r"\1***", masked)


def without_password(dsn: str) -> tuple[str, str | None]:
    """(the DSN with its password taken out, that password or None). The rest of the DSN, the
    user included, is kept as written."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    found = params.pop("password", None)
    if found is None:
        return dsn, None
    secret = str(found)
    if dsn.startswith(("postgresql://", "postgres://")):
        from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

        parts = urlsplit(dsn)
        userinfo, _, host = parts.netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
        return urlunsplit((parts.scheme, f"{user}@{host}" if user else host, parts.path, query, "")), secret
    return make_conninfo("", **params), secret


def keyring_account(dsn: str) -> str:
    """The keyring account name for a DSN: user@host:port/dbname (no password)."""
    from psycopg.conninfo import conninfo_to_dict  # psycopg loads libpq: only when a DSN is parsed

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


def keyring_secret(account: str) -> str | None:
    """A secret stored under this account (e.g. `embeddings:<url>`), or None."""
    try:
        import keyring
        from keyring.errors import KeyringError
    except ImportError:  # pragma: no cover - keyring is a dependency
        return None
    try:
        return keyring.get_password(KEYRING_SERVICE, account)
    except (KeyringError, RuntimeError, OSError) as exc:
        log.debug("keyring unavailable: %s", exc)
        return None


def file_password(dsn: str, path: Path | None) -> str | None:
    """The token stored for this DSN in the fallback file, or None."""
    if path is None or not path.is_file():
        return None
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("cannot read the credentials file %s: %s", path, exc)
        return None
    value = stored.get(keyring_account(dsn)) if isinstance(stored, dict) else None
    return value if isinstance(value, str) else None


def store_password(dsn: str, secret: str, *, fallback: Path) -> Path | None:
    """Keep a token for this DSN: in the OS keyring, else in the 0600 fallback file.
    Returns None when the keyring took it, else the file it went to."""
    try:
        import keyring
        from keyring.errors import KeyringError

        keyring.set_password(KEYRING_SERVICE, keyring_account(dsn), secret)
        return None
    except (KeyringError, RuntimeError, OSError) as exc:
        log.debug("no usable keyring (%s); using %s", exc, fallback)
    stored: dict[str, str] = {}
    if fallback.is_file():
        try:
            loaded = json.loads(fallback.read_text(encoding="utf-8"))
            stored = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            stored = {}
    stored[keyring_account(dsn)] = secret
    fallback.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(fallback, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        os.chmod(fallback, 0o600)  # also when the file existed with wider rights
        json.dump(stored, out, indent=1)
    return fallback


def with_password(dsn: str, password: str | None, *, fallback_file: Path | None = None) -> str:
    """Add a password to a DSN that has none; a DSN's own password wins, then `password` (env),
    then the keyring, then the fallback file written by `mcp-memory login`."""
    from psycopg.conninfo import conninfo_to_dict  # psycopg loads libpq: only when a DSN is parsed

    params = conninfo_to_dict(dsn)
    if params.get("password"):
        return dsn
    if password is None:
        password = keyring_password(dsn)
    if password is None:
        password = file_password(dsn, fallback_file)
    if password is None:
        return dsn
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dsn, password=password)
