"""Tokens = database roles (README, One central PostgreSQL for every host, README, design note 7).

A token is `mmt.<role>.<43 random url-safe characters>` and is the password of the LOGIN role
`<role>` (the name given to `token create`). The role name inside the token lets a REST server know
which role to log in as without a lookup table; PostgreSQL then checks the password, and the SHA-256
of the token (stored in access_tokens; a 256-bit random secret needs no slow hash) is checked too,
so that a server whose pg_hba trusts local connections still rejects a forged token.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import Invalid, NotFound, Unauthorized, Unavailable
from ..store.db import LOGIN_REFUSED, Database
from ..store.security_store import GROUP_ARCHIVER, GROUP_RO, GROUP_RW, SecurityStore, TokenLimits, TokenRow

PREFIX = "mmt"
SECRET_CHARS = 43  # secrets.token_urlsafe(32)
ALL_PROJECTS = "*"
_NAME = re.compile(r"^[a-z][a-z0-9_\-]{0,62}$")
_TOKEN = re.compile(rf"^{PREFIX}\.([a-z][a-z0-9_\-]{{0,62}})\.([A-Za-z0-9_\-]{{{SECRET_CHARS}}})$")
_RESERVED = ("pg_", "mcp_memory_", "postgres")


@dataclass(frozen=True)
class CreatedToken:
    name: str
    role: str
    token: str
    dsn: str
    projects: list[str]
    read_only: bool
    archiver: bool
    expires: datetime | None = None


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise Invalid("--name must start with a lowercase letter and hold only a-z, 0-9, _ and - (≤ 63)")
    if name.startswith(_RESERVED):
        raise Invalid(f"--name {name} is reserved (pg_…, mcp_memory_…, postgres)")
    return name


def check_projects(projects: list[str] | None, *, archiver: bool) -> list[str]:
    """At least one project; an archiver without --project reads every project ('*')."""
    projects = sorted({p.strip() for p in projects or [] if p and p.strip()})
    if not projects:
        if archiver:
            return [ALL_PROJECTS]
        raise Invalid("give at least one --project (or '*' for every project)")
    for project in projects:
        if len(project) > 200:
            raise Invalid("--project must be at most 200 characters")
    return projects


# One spelling of a duration for every flag of `token`: a whole number and a unit. A bare "m" is
# refused rather than guessed (minutes or months?); PostgreSQL's own "min" is the minute.
_SPAN = re.compile(r"^([0-9]{1,9})(ms|s|min|h|d)$")
_UNITS = {"ms": timedelta(milliseconds=1), "s": timedelta(seconds=1), "min": timedelta(minutes=1),
          "h": timedelta(hours=1), "d": timedelta(days=1)}
# The longest timeout PostgreSQL takes (an int of milliseconds).
_PG_TIMEOUT_MAX = timedelta(milliseconds=2**31 - 1)


def parse_duration(value: str, *, flag: str, units: tuple[str, ...], example: str,
                   least: timedelta, most: timedelta, most_text: str) -> timedelta:
    """`value` (e.g. "9s", "90min") as a timedelta from `least` to `most`, else Invalid naming `flag`."""
    text = value.strip() if isinstance(value, str) else ""
    match = _SPAN.match(text)
    if not match or match.group(2) not in units:
        hint = "; write min for minutes" if re.fullmatch(r"[0-9]+\s*m", text) else ""
        raise Invalid(f"{flag} must be a whole number followed by {', '.join(units[:-1])} or {units[-1]}, "
                      f"such as {example} (got {value!r}{hint})")
    delta = int(match.group(1)) * _UNITS[match.group(2)]
    if delta < least:
        raise Invalid(f"{flag} must be more than 0 (got {value!r})")
    if delta > most:
        raise Invalid(f"{flag} must be at most {most_text} (got {value!r})")
    return delta


def check_limits(*, connections: int | None = None, statement_timeout: str | None = None,
                 idle_timeout: str | None = None, lock_timeout: str | None = None) -> TokenLimits:
    """The role limits of `token create` (defaults where not given), each checked."""
    defaults = TokenLimits()
    if connections is not None and (isinstance(connections, bool) or not 1 <= connections <= 10_000):
        raise Invalid("--connection-limit must be a whole number from 1 to 10000")
    for flag, value in (("--statement-timeout", statement_timeout), ("--idle-timeout", idle_timeout),
                        ("--lock-timeout", lock_timeout)):
        if value is not None:  # passed to PostgreSQL as written: its units, within its range
            parse_duration(value, flag=flag, units=("ms", "s", "min", "h", "d"), example="500ms, 30s, 10min or 2h",
                           least=timedelta(milliseconds=1), most=_PG_TIMEOUT_MAX, most_text="24d")
    return TokenLimits(connections=connections or defaults.connections,
                       statement_timeout=statement_timeout.strip() if statement_timeout else defaults.statement_timeout,
                       idle_in_transaction_timeout=idle_timeout.strip() if idle_timeout
                       else defaults.idle_in_transaction_timeout,
                       lock_timeout=lock_timeout.strip() if lock_timeout else defaults.lock_timeout)


def check_expires(value: str | None) -> datetime | None:
    """`--expires 9s` (s, min, h or d) → the moment the token stops working (UTC)."""
    if value is None:
        return None
    delta = parse_duration(value, flag="--expires", units=("s", "min", "h", "d"), example="9s, 90min, 12h or 30d",
                           least=timedelta(seconds=1), most=timedelta(days=3650), most_text="3650d")
    return datetime.now(UTC) + delta


def new_token(role: str) -> str:
    return f"{PREFIX}.{role}.{secrets.token_urlsafe(32)}"


def parse_token(token: str) -> str | None:
    """The role a token belongs to, or None when it is not a token of ours."""
    match = _TOKEN.match(token or "")
    return match.group(1) if match else None


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def digest_matches(token: str, stored: bytes | None) -> bool:
    return stored is not None and hmac.compare_digest(token_digest(token), bytes(stored))


def role_dsn(dsn: str, role: str, *, password: str | None = None) -> str:
    """The DSN that connects as `role`: without any password (a token is the password), or with
    the given one."""
    if dsn.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(dsn)
        host = parts.netloc.rpartition("@")[2]
        query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k not in ("password", "user")])
        user = quote(role, safe="") + (f":{quote(password, safe='')}" if password else "")
        return urlunsplit((parts.scheme, f"{user}@{host}", parts.path, query, ""))
    params = {k: v for k, v in conninfo_to_dict(dsn).items() if k != "password"}
    params["user"] = role
    if password:
        params["password"] = password
    return make_conninfo("", **params)


def create(db: Database, *, name: str, projects: list[str] | None, read_only: bool = False,
           archiver: bool = False, limits: TokenLimits | None = None,
           expires: datetime | None = None) -> CreatedToken:
    """Create the role and its scope in one transaction (needs the owner DSN: CREATEROLE)."""
    role = check_name(name)
    scope = check_projects(projects, archiver=archiver)
    read_only = read_only or archiver  # the archiver reads what it archives; it writes only export_jobs
    groups = [GROUP_ARCHIVER] if archiver else [GROUP_RO if read_only else GROUP_RW]
    token = new_token(role)
    with db.transaction() as conn:
        SecurityStore(conn).create_role(role, token=token, groups=groups, read_only=read_only, archiver=archiver,
                                        projects=scope, token_sha256=token_digest(token), limits=limits,
                                        expires=expires)
    return CreatedToken(name=name, role=role, token=token, dsn=role_dsn(db.dsn(), role), projects=scope,
                        read_only=read_only, archiver=archiver, expires=expires)


@dataclass(frozen=True)
class CreatedGateway:
    name: str
    role: str
    password: str
    dsn: str  # with the password: what `serve-http` is started with


def create_gateway(db: Database, *, name: str) -> CreatedGateway:
    """The login of `serve-http` and of PgBouncer (README, gateway): a member of no token role, it acts
    for a token only with that token's proof in each transaction (mm_enter), and reads and
    writes nothing by itself."""
    role = check_name(name)
    password = secrets.token_urlsafe(32)
    with db.transaction() as conn:
        SecurityStore(conn).create_gateway(role, password=password)
    return CreatedGateway(name=name, role=role, password=password,
                          dsn=role_dsn(db.dsn(), role, password=password))


def verify(db: Database, token: str) -> TokenRow:
    """Log in as the token's role (PostgreSQL checks the password) and compare the stored digest
    (which also holds where the server trusts local logins). `db` connects as that role."""
    try:
        with db.connect(autocommit=True) as conn:
            mine = SecurityStore(conn).my_token()
    except Unavailable as exc:
        if LOGIN_REFUSED.search(str(exc.__cause__ or exc)):
            raise Unauthorized("the token was not accepted (revoked, expired or mistyped)") from exc
        raise
    if mine is None or not digest_matches(token, mine.token_sha256):
        raise Unauthorized("the token was not accepted (revoked, expired or mistyped)")
    return mine


def list_(db: Database) -> list[TokenRow]:
    with db.transaction() as conn:
        return SecurityStore(conn).list_tokens()


@dataclass(frozen=True)
class RotatedToken:
    created: CreatedToken
    previous: list[str]  # the roles of earlier generations, valid until `grace_until`
    grace_until: datetime


def check_grace(value: str) -> timedelta:
    """`--grace 15min` (s, min, h or d; 0s ends the old token at once) → how long it still works."""
    return parse_duration(value, flag="--grace", units=("s", "min", "h", "d"), example="0s, 15min, 1h or 2d",
                          least=timedelta(0), most=timedelta(days=30), most_text="30d")


def rotate(db: Database, name: str, *, grace: timedelta, expires: datetime | None = None) -> RotatedToken:
    """A new token for `name`: a new role (`<name>_r<n>`) with the same projects, mode and connection
    limit, and the earlier roles' logins ending after `grace` (a PostgreSQL role has one password, so
    old and new can both log in only as two roles). Revoking `name` revokes every generation."""
    with db.transaction() as conn:
        generations = SecurityStore(conn).generations(name)
    if not generations:
        raise NotFound(f"no token named {name}")
    latest = generations[0]
    number = len(generations) + 1
    role = f"{name}_r{number}"
    if len(role) > 63:
        raise Invalid(f"token {name} has too long a name to rotate (its new role {role} would pass 63 characters)")
    token = new_token(role)
    groups = [GROUP_ARCHIVER] if latest["archiver"] else [GROUP_RO if latest["read_only"] else GROUP_RW]
    limits = replace(TokenLimits(), connections=latest["connection_limit"]) \
        if latest["connection_limit"] and latest["connection_limit"] > 0 else TokenLimits()
    grace_until = datetime.now(UTC) + grace
    with db.transaction() as conn:
        store = SecurityStore(conn)
        store.create_role(role, token=token, groups=groups, read_only=latest["read_only"], archiver=latest["archiver"],
                          projects=list(latest["projects"]), token_sha256=token_digest(token), limits=limits,
                          expires=expires, token_name=name)
        previous = []
        for old in generations:
            if old["valid_until"] is None or old["valid_until"] > grace_until:
                store.expire(old["role_name"], grace_until)
            previous.append(old["role_name"])
    created = CreatedToken(name=name, role=role, token=token, dsn=role_dsn(db.dsn(), role),
                           projects=list(latest["projects"]), read_only=latest["read_only"],
                           archiver=latest["archiver"], expires=expires)
    return RotatedToken(created=created, previous=previous, grace_until=grace_until)


def revoke(db: Database, name: str) -> int | None:
    """Every role of token `name` (its rotations too; or the one role of that name): scope removed
    and logins refused (committed first, so the revocation holds even if a later step fails), then
    open connections ended and the role dropped. Returns the connections ended, None when this
    owner may not end them (they then see and write nothing: no scope rows)."""
    with db.transaction() as conn:
        roles = [g["role_name"] for g in SecurityStore(conn).generations(name)] or [name]
    ended: int | None = 0
    for role in roles:
        with db.transaction() as conn:
            SecurityStore(conn).remove_scope(role)
        with db.transaction() as conn:
            count = SecurityStore(conn).terminate(role)
        with db.transaction() as conn:
            SecurityStore(conn).drop_role(role)
        ended = None if ended is None or count is None else ended + count
    return ended
