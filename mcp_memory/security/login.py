"""`mcp-memory login`: a host keeps its token and the central DSN, so later commands need neither.

The token goes to the OS keyring (service "mcp-memory", account `keyring_account(dsn)`), or, where
no keyring backend exists (headless Linux), to a 0600 file in the config dir; the DSN, without any
password, goes to `[database] dsn` of the config file (other settings and comments are kept).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
import tomlkit
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..config import Settings, edited_config
from ..credentials import keyring_account, mask_dsn, store_password
from ..errors import Forbidden, Invalid, Unavailable
from ..store.db import login_of_token, translate_errors
from ..store.security_store import SecurityStore
from .tokens import parse_token, role_dsn


@dataclass(frozen=True)
class LoginResult:
    dsn: str
    role: str
    account: str
    fallback_file: Path | None  # None: stored in the OS keyring
    config_path: Path
    projects: list[str]
    read_only: bool
    direct_dsn: str | None = None


def normalise_dsn(dsn: str, token: str) -> str:
    """The DSN without a password; its user is the token's role (added when the DSN has none)."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise Invalid(f"--dsn is not a PostgreSQL DSN: {exc}") from None
    role = parse_token(token)
    user = str(params["user"]) if params.get("user") is not None else None
    # a rotated token's login (USER_r2, …) is the same token: the DSN keeps the token's name
    if role and user and user != role and not re.fullmatch(re.escape(user) + r"_r[0-9]+", role):
        raise Invalid(f"this token belongs to role {role}, but the DSN connects as {user}")
    return role_dsn(dsn, user or role or "")


def verify(dsn: str, token: str, *, timeout: float, gateway: bool = False) -> tuple[str, list[str], bool]:
    """Log in once with the token: (role, projects, read_only). Nothing is stored if this fails.
    Through a pooler's forced gateway login (`gateway`), the transaction proves the token first
    (mm_enter): the gateway is nobody without it."""
    try:
        with translate_errors(), psycopg.connect(login_of_token(make_conninfo(dsn, password=token)),
                                                 connect_timeout=max(1, int(timeout)), prepare_threshold=None) as conn:
            store = SecurityStore(conn)
            if gateway:
                role = store.enter(token)
            else:
                role, _ = store.whoami()
            mine = store.my_token()
    except Unavailable as exc:
        raise Forbidden(f"cannot log in with this token ({exc}); nothing was stored") from exc
    if mine is None:
        return role, [], False
    return role, mine.projects, mine.read_only


def record_dsn(config_path: Path, dsn: str, *, pgbouncer: bool | None, gateway: bool | None = None,
               direct_dsn: str | None = None) -> None:
    """Set `[database] dsn` (and `pgbouncer`, `gateway`, `direct_dsn` when given) in the config file,
    keeping the rest."""
    with edited_config(config_path) as document:
        database = document.get("database")
        if database is None:
            database = tomlkit.table()
            document["database"] = database
        database["dsn"] = dsn
        for key, value in (("pgbouncer", pgbouncer), ("gateway", gateway), ("direct_dsn", direct_dsn)):
            if value is not None:
                database[key] = value


def same_address(settings: Settings, clean: str, token: str) -> bool:
    """Whether `clean` is the DSN the config already records (the host's DSN as it is): a login
    again with a new token then keeps what that DSN was recorded with (`pgbouncer`, `gateway`,
    `direct_dsn`), and the token is stored for the direct address too, or the host's live tail and
    doctor would go on with the old token there."""
    if not settings.dsn or settings.embedded:
        return False
    try:
        return normalise_dsn(settings.dsn, token) == clean
    except Invalid:  # the config names another role: a login for another token
        return False


def login(settings: Settings, *, dsn: str, token: str, check: bool = True, pgbouncer: bool | None = None,
          gateway: bool | None = None, direct_dsn: str | None = None) -> LoginResult:
    """Check the token (through the pooler, and directly at `direct_dsn` when given), then store it
    for both addresses and record them. A pooled host (`pgbouncer`) proves its token in every
    transaction (`gateway`, on unless told otherwise): the tier of install/pgbouncer/."""
    token = token.strip()
    if not token:
        raise Invalid("the token is empty")
    clean = normalise_dsn(dsn, token)
    if same_address(settings, clean, token):  # a new token for the host's DSN as it is (token rotate)
        if pgbouncer is None:
            pgbouncer, gateway = settings.pgbouncer, settings.gateway if gateway is None else gateway
        direct_dsn = direct_dsn or settings.direct_dsn
    if gateway is None and pgbouncer:
        gateway = True
    direct = normalise_dsn(direct_dsn, token) if direct_dsn else None
    role, projects, read_only = (verify(clean, token, timeout=settings.connect_timeout, gateway=bool(gateway))
                                 if check else (str(conninfo_to_dict(clean).get("user") or ""), [], False))
    if direct and check:
        verify(direct, token, timeout=settings.connect_timeout)
    fallback = store_password(clean, token, fallback=settings.credentials_file)
    if direct:
        store_password(direct, token, fallback=settings.credentials_file)
    record_dsn(settings.write_config_path, clean, pgbouncer=pgbouncer, gateway=gateway, direct_dsn=direct)
    return LoginResult(dsn=mask_dsn(clean), role=role, account=keyring_account(clean), fallback_file=fallback,
                       config_path=settings.write_config_path, projects=projects, read_only=read_only,
                       direct_dsn=mask_dsn(direct) if direct else None)
