"""`mcp-memory token create | list | rotate | revoke | gateway`, `mcp-memory login`, `mcp-memory serve-http`."""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import quote, urlencode

from ..config import Settings
from ..errors import Invalid
from .output import print_json

if TYPE_CHECKING:
    from ..store.db import Database


def add_parsers(sub: argparse._SubParsersAction) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    token = sub.add_parser(
        "token", help="token-scoped database roles: create, list, rotate, revoke, gateway (run with the owner DSN)",
        description="A token is the password of a database role limited to some projects by row-level "
        "security.\nExamples:\n  mcp-memory --dsn postgresql://owner@db/mem token create --name host-a --project web\n"
        "  mcp-memory token create --name archiver --archiver --json\n"
        "  mcp-memory token list\n  mcp-memory token revoke host-a", formatter_class=raw)
    actions = token.add_subparsers(dest="token_action", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="create a role and print its token (shown once)")
    create.add_argument("--name", required=True, help="role name (a-z, 0-9, _ and -), e.g. the host name")
    create.add_argument("--project", action="append", metavar="P",
                        help="a project the token may use (repeat; '*' = every project)")
    create.add_argument("--read-only", action="store_true", help="read, never write")
    create.add_argument("--archiver", action="store_true",
                        help="for `mcp-memory archive`: reads its projects (all without --project), "
                        "updates export_jobs")
    create.add_argument("--expires", metavar="DURATION",
                        help="the token stops working after this long: s, min, h or d, e.g. 9s, 90min, 12h "
                        "or 30d (default: never)")
    create.add_argument("--connection-limit", type=int, metavar="N",
                        help="most connections the role may hold at once (default 20)")
    create.add_argument("--statement-timeout", metavar="DURATION",
                        help="the role's statement_timeout: ms, s, min, h or d, e.g. 30s or 10min (default 10min)")
    create.add_argument("--idle-timeout", metavar="DURATION",
                        help="the role's idle_in_transaction_session_timeout (default 60s)")
    create.add_argument("--lock-timeout", metavar="DURATION", help="the role's lock_timeout (default 60s)")
    create.add_argument("--json", action="store_true", help='print {"name", "role", "token", "dsn"}')
    listing = actions.add_parser("list", help="tokens with their projects and open connections")
    listing.add_argument("--json", action="store_true", help="print one JSON document")
    revoke = actions.add_parser("revoke", help="drop the role; its open connections end")
    revoke.add_argument("name")
    rotate = actions.add_parser(
        "rotate", help="a new token for NAME; the old one keeps working for the grace period",
        description="Example: mcp-memory token rotate host-a --grace 1h\n"
        "  (then on host-a: mcp-memory login --dsn '<printed dsn>')", formatter_class=raw)
    rotate.add_argument("name")
    rotate.add_argument("--grace", default="1h", metavar="DURATION",
                        help="how long the old token still works: s, min, h or d, e.g. 0s, 15min, 1h (default 1h)")
    rotate.add_argument("--expires", metavar="DURATION",
                        help="the new token stops working after this long, e.g. 9s, 90min, 12h or 30d "
                        "(default: never)")
    rotate.add_argument("--json", action="store_true",
                        help='print {"name", "role", "token", "dsn", "previous", "previous_valid_until"}')
    gateway = actions.add_parser(
        "gateway", help="create the login serve-http (or PgBouncer) uses: it acts for a token only with the token's "
             "per-transaction proof, can become no token role, reads nothing itself",
        description="Example: mcp-memory token gateway --name rest-gw\n"
        "  then: mcp-memory --dsn '<printed dsn>' serve-http --host 0.0.0.0", formatter_class=raw)
    gateway.add_argument("--name", required=True, help="login name (a-z, 0-9, _ and -)")
    gateway.add_argument("--json", action="store_true", help='print {"name", "role", "password", "dsn"}')

    login = sub.add_parser(
        "login", help="store this host's token (OS keyring, else a 0600 file) and the central DSN",
        description="Example: mcp-memory login --dsn postgresql://host-a@db.example/mem\n"
        "  (prompts for the token; or pipe it: ... login --dsn ... --token-stdin)", formatter_class=raw)
    login.add_argument("--dsn", dest="login_dsn", metavar="DSN",
                       help="the central database, as this host's role (no password)")
    login.add_argument("--token-stdin", action="store_true", help="read the token from standard input")
    login.add_argument("--no-verify", action="store_true", help="store without logging in once first")
    login.add_argument("--pgbouncer", action=argparse.BooleanOptionalAction, default=None,
                       help="the DSN points at PgBouncer in transaction mode (no prepared statements; the "
                       "token proved in each transaction, [database] gateway, unless --no-gateway)")
    login.add_argument("--gateway", action=argparse.BooleanOptionalAction, default=None,
                       help="each transaction proves the token (the pooler logs in as one gateway login; "
                       "on with --pgbouncer)")
    login.add_argument("--direct-dsn", metavar="DSN",
                       help="the database itself, past the pooler, as this host's role: live tail, the "
                       "archiver's lease and doctor use it ([database] direct_dsn); the token is stored for it too")

    http = sub.add_parser(
        "serve-http", help="REST API (README, REST) and MCP streamable HTTP at /mcp",
        description="Example: mcp-memory serve-http --port 8765\n"
        "  curl -H 'Authorization: Bearer <token>' http://127.0.0.1:8765/v1/sessions", formatter_class=raw)
    http.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1; another one "
                      "needs at least one token)")
    http.add_argument("--port", type=int, default=8765)
    http.add_argument("--as-owner", action="store_true",
                      help="run with the database owner's login (refused otherwise: use a gateway login, "
                      "`mcp-memory token gateway`)")


def handlers() -> dict[str, Callable[..., int]]:
    return {"token": token, "login": login, "serve-http": serve_http}


def token(settings: Settings, args: argparse.Namespace) -> int:
    from ..security import tokens
    from ..store.db import Database

    db = Database(settings, application_name="mcp-memory token")
    try:
        if args.token_action == "create":
            return _create(db, args)
        if args.token_action == "gateway":
            return _gateway(db, args)
        if args.token_action == "rotate":
            return _rotate(db, args)
        if args.token_action == "list":
            rows = tokens.list_(db)
            if args.json:
                print_json({"tokens": [_row_json(r) for r in rows]})
                return 0
            for r in rows:
                mode = "archiver" if r.archiver else "read-only" if r.read_only else "read-write"
                state = "" if r.can_login else "  (login disabled)"
                if r.expires is not None:
                    state += f"  (expire{'d' if r.expires <= datetime.now(UTC) else 's'} {r.expires:%Y-%m-%d %H:%M:%S %Z})"
                print(f"{r.role:<24} {mode:<10} {','.join(r.projects):<30} {r.connections} connection(s){state}")
            if not rows:
                print("no tokens")
            return 0
        ended = tokens.revoke(db, args.name)
        print(f"revoked {args.name}: role dropped, " + (f"{ended} open connection(s) ended" if ended is not None
              else "open connections could not be ended by this role, but they can no longer read or write"))
        return 0
    finally:
        db.close()


def _create(db: Database, args: argparse.Namespace) -> int:
    from ..security import tokens

    limits = tokens.check_limits(connections=args.connection_limit, statement_timeout=args.statement_timeout,
                                 idle_timeout=args.idle_timeout, lock_timeout=args.lock_timeout)
    created = tokens.create(db, name=args.name, projects=args.project, read_only=args.read_only,
                            archiver=args.archiver, limits=limits, expires=tokens.check_expires(args.expires))
    if args.json:
        doc = {"name": created.name, "role": created.role, "token": created.token, "dsn": uri_dsn(created.dsn)}
        if created.expires:  # only when asked for: the contract's four keys otherwise
            doc["expires"] = created.expires.isoformat()
        print_json(doc)
        return 0
    mode = "archiver" if created.archiver else "read-only" if created.read_only else "read-write"
    until = f"; expires {created.expires:%Y-%m-%d %H:%M:%S} UTC" if created.expires else ""
    print(f"token for role {created.role} ({mode}; projects: {', '.join(created.projects)}{until}) — shown once:\n")
    print(f"  {created.token}\n")
    print(f"on the host:  mcp-memory login --dsn '{uri_dsn(created.dsn)}'   (then paste the token)")
    return 0


def _rotate(db: Database, args: argparse.Namespace) -> int:
    from ..security import tokens

    rotated = tokens.rotate(db, args.name, grace=tokens.check_grace(args.grace),
                            expires=tokens.check_expires(args.expires))
    new = rotated.created
    if args.json:
        print_json({"name": new.name, "role": new.role, "token": new.token, "dsn": uri_dsn(new.dsn),
                    "expires": new.expires.isoformat() if new.expires else None, "previous": rotated.previous,
                    "previous_valid_until": rotated.grace_until.isoformat()})
        return 0
    print(f"new token for {new.name} (role {new.role}; projects: {', '.join(new.projects)}) — shown once:\n")
    print(f"  {new.token}\n")
    print(f"the old token ({', '.join(rotated.previous)}) works until {rotated.grace_until:%Y-%m-%d %H:%M:%S} UTC")
    print("on the host: put the new token where the old one was (`mcp-memory login` with the host's DSN as it is,\n"
          "  or MCP_MEMORY_PASSWORD / the archiver's archive.env): the host logs in as the token's new role by itself,\n"
          f"  and stays {new.name} to the database (its messages, scopes and leases)")
    return 0


def _gateway(db: Database, args: argparse.Namespace) -> int:
    from ..security import tokens

    created = tokens.create_gateway(db, name=args.name)
    if args.json:
        print_json({"name": created.name, "role": created.role, "password": created.password,
                    "dsn": uri_dsn(created.dsn)})
        return 0
    print(f"gateway login {created.role} (can act as any token role; reads and writes nothing itself) — "
          "password shown once:\n")
    print(f"  {created.password}\n")
    print(f"serve REST with:  mcp-memory --dsn '{uri_dsn(created.dsn)}' serve-http")
    return 0


def uri_dsn(dsn: str) -> str:
    """The DSN in the URI form the admin guide shows (`postgresql://role@host:port/db?opt=…`),
    whichever form the owner's own DSN had: one form to copy into `login --dsn` and compare with
    the docs. A socket folder or several hosts go to the query (`?host=/run/postgresql`), where
    libpq takes them as they are."""
    if dsn.startswith("postgresql://"):
        return dsn
    if dsn.startswith("postgres://"):
        return "postgresql://" + dsn[len("postgres://"):]
    from psycopg.conninfo import conninfo_to_dict  # here: `serve` parses its arguments without psycopg

    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", "")
    if password:
        user += ":" + quote(password, safe="")
    dbname = quote(params.pop("dbname", ""), safe="")
    host, port = params.get("host", ""), params.get("port", "")
    netloc = ""
    if host and not any(c in host for c in "/,") and "," not in port:
        params.pop("host")
        netloc = f"[{host}]" if ":" in host else host
        if params.pop("port", ""):
            netloc += f":{port}"
    query = urlencode(sorted(params.items()))
    return f"postgresql://{user}{'@' if user else ''}{netloc}/{dbname}" + (f"?{query}" if query else "")


def _row_json(r) -> dict:
    return {"name": r.name or r.role, "role": r.role, "projects": r.projects, "read_only": r.read_only,
            "archiver": r.archiver, "created_by": r.created_by,
            "created_at": r.created_at.isoformat() if r.created_at else None,
            "can_login": r.can_login, "connections": r.connections,
            "expires": r.expires.isoformat() if r.expires else None}


def login(settings: Settings, args: argparse.Namespace) -> int:
    from ..security.login import login as do_login

    dsn = args.login_dsn or (settings.dsn if not settings.embedded else None)
    if not dsn:
        raise Invalid("give the central database: mcp-memory login --dsn postgresql://<role>@<host>/<db>")
    secret = sys.stdin.readline() if args.token_stdin else getpass.getpass("token (from `mcp-memory token create`): ")
    result = do_login(settings, dsn=dsn, token=secret, check=not args.no_verify, pgbouncer=args.pgbouncer,
                      gateway=args.gateway, direct_dsn=args.direct_dsn)
    where = (f"the OS keyring (service mcp-memory, account {result.account})" if result.fallback_file is None
             else f"{result.fallback_file} (mode 0600): no OS keyring backend is available on this host")
    print(f"logged in as {result.role or '?'} on {result.dsn}")
    if result.projects:
        print(f"projects: {', '.join(result.projects)}" + (" (read-only)" if result.read_only else ""))
    if result.direct_dsn:
        print(f"direct connection (live tail, leases): {result.direct_dsn}")
    print(f"token stored in {where}")
    print(f"DSN recorded in {result.config_path}")
    return 0


def serve_http(settings: Settings, args: argparse.Namespace) -> int:
    from ..http.server import serve

    serve(settings, host=args.host, port=args.port, as_owner=args.as_owner)
    return 0
