"""SQL for token roles and their scopes (migration 0004): every statement security/ runs.

Role DDL takes no bind parameters, so it is composed here with `psycopg.sql` (identifiers quoted,
the password as a literal). The literal is a SCRAM-SHA-256 verifier computed on the client by libpq
(PQencryptPasswordConn): the token itself never reaches the server, its logs or pg_authid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from ..errors import Conflict, Forbidden, NotFound, Unavailable
from .sql import first_row, q

GROUP_RW = "mcp_memory_rw"
GROUP_RO = "mcp_memory_ro"
GROUP_ARCHIVER = "mcp_memory_archiver"
GROUP_GATEWAY = "mcp_memory_gateway"  # logins of serve-http and PgBouncer: a member of no token role (0026)


@dataclass(frozen=True)
class TokenLimits:
    """What one token role may hold (README, token limits): its connections, and the server-side
    timeouts its sessions start with. The connection limit is the one a token cannot lift itself."""

    connections: int = 20
    statement_timeout: str = "10min"
    idle_in_transaction_timeout: str = "60s"
    lock_timeout: str = "60s"


@dataclass(frozen=True)
class TokenRow:
    role: str
    read_only: bool
    archiver: bool
    projects: list[str]
    created_by: str | None = None
    created_at: datetime | None = None
    can_login: bool = True
    connections: int = 0
    token_sha256: bytes | None = None
    expires: datetime | None = None
    name: str | None = None  # the token's name: its first role's, shared by its rotations


class SecurityStore:
    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def _value(self, name: str, params: dict[str, object] | None = None) -> Any:
        row = self.conn.execute(q(name), params or {}).fetchone()
        return row[0] if row else None

    def create_role(
        self, role: str, *, token: str, groups: Sequence[str], read_only: bool, archiver: bool,
        projects: Sequence[str], token_sha256: bytes, limits: TokenLimits | None = None,
        expires: datetime | None = None, token_name: str | None = None,
    ) -> str:
        """Create the LOGIN role with its groups and scope rows; return the schema it must reach."""
        if not self._value("security_groups_present"):
            raise Unavailable("the group roles of migration 0004 are missing: run `mcp-memory db migrate` "
                              "as a role with CREATEROLE (the schema owner)")
        verifier = self._new_login(role, token)
        until = sql.SQL("VALID UNTIL {} ").format(sql.Literal(expires.isoformat())) if expires else sql.SQL("")
        statement = sql.SQL("CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
                            "PASSWORD {password} {until}IN ROLE {groups}").format(
            role=sql.Identifier(role), password=sql.Literal(verifier), until=until,
            groups=sql.SQL(", ").join(sql.Identifier(g) for g in groups))
        try:
            self.conn.execute(statement)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise Forbidden(f"creating a token needs CREATEROLE and admin rights on the group roles "
                            f"(run it with the owner DSN): {exc.diag.message_primary}") from exc
        self._let_owner_act_as(role)
        self.set_limits(role, limits or TokenLimits())
        schema = self._reach_schema(role)
        self.conn.execute(q("security_insert_token"), {"role": role, "read_only": read_only, "archiver": archiver,
                                                        "token_sha256": token_sha256})
        if token_name is not None:
            self.conn.execute(q("security_set_token_name"), {"role": role, "token_name": token_name})
        for project in projects:
            self.conn.execute(q("security_insert_token_project"), {"role": role, "project_id": project})
        return schema

    def _new_login(self, role: str, secret: str) -> str:
        """The SCRAM verifier of `secret` for a role that must not exist yet."""
        if self._value("security_role_exists", {"role": role}):
            raise Conflict(f"a database role named {role} already exists; choose another --name")
        return self.conn.pgconn.encrypt_password(secret.encode(), role.encode(), b"scram-sha-256").decode()

    def _reach_schema(self, role: str) -> str:
        """The schema of the tables, on the role's search_path in this database; returned."""
        schema = str(self._value("security_schema") or "public")
        if schema != "public":
            self.conn.execute(sql.SQL("ALTER ROLE {role} IN DATABASE {db} SET search_path = {schema}").format(
                role=sql.Identifier(role), db=sql.Identifier(self.conn.info.dbname),
                schema=sql.Identifier(schema)))
        return schema

    def _let_owner_act_as(self, role: str) -> None:
        """`serve-http` runs every token's transactions on the owner's pool with SET LOCAL ROLE: a
        non-superuser owner needs membership with the SET option (PostgreSQL 16 gives a role's
        creator only ADMIN), without inheriting anything."""
        if self._value("security_is_superuser"):
            return
        self._grant_membership(role, None)

    def _grant_membership(self, role: str, member: str | None, *, inherit: bool = False) -> None:
        """`member` (CURRENT_USER when None) may SET ROLE to `role`, and inherits nothing of it
        unless `inherit` (before PostgreSQL 16, the member's own INHERIT attribute decides)."""
        options = (f"WITH INHERIT {'TRUE' if inherit else 'FALSE'}, SET TRUE"
                   if self.conn.info.server_version >= 160000 else "")
        grantee = sql.Identifier(member) if member else sql.SQL("CURRENT_USER")
        self.conn.execute(sql.SQL("GRANT {role} TO {grantee} " + options).format(role=sql.Identifier(role),
                                                                                  grantee=grantee))

    def set_limits(self, role: str, limits: TokenLimits) -> None:
        self.conn.execute(sql.SQL("ALTER ROLE {role} CONNECTION LIMIT {n}").format(
            role=sql.Identifier(role), n=sql.Literal(int(limits.connections))))
        for setting, value in (("statement_timeout", limits.statement_timeout),
                               ("idle_in_transaction_session_timeout", limits.idle_in_transaction_timeout),
                               ("lock_timeout", limits.lock_timeout)):
            self.conn.execute(sql.SQL("ALTER ROLE {role} SET {setting} = {value}").format(
                role=sql.Identifier(role), setting=sql.Identifier(setting), value=sql.Literal(value)))

    def create_gateway(self, role: str, *, password: str) -> str:
        """A LOGIN in the gateway group (migration 0026): a member of no token role, with the token
        groups' rights, which open nothing without a caller: each transaction names its token with
        mm_enter(token), and every policy and write function asks mm_caller(). Returns the schema."""
        if not self._value("security_gateway_present"):
            raise Unavailable("the group role mcp_memory_gateway of migration 0014 is missing: run "
                              "`mcp-memory db migrate` as a role with CREATEROLE (the schema owner)")
        verifier = self._new_login(role, password)
        try:
            # the login inherits the group's rights (the token groups', migration 0026); it may become
            # no token role
            self.conn.execute(sql.SQL("CREATE ROLE {role} LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE "
                                      "NOREPLICATION PASSWORD {password}").format(
                role=sql.Identifier(role), password=sql.Literal(verifier)))
            self._grant_membership(GROUP_GATEWAY, role, inherit=True)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise Forbidden(f"creating a gateway needs CREATEROLE and admin rights on mcp_memory_gateway "
                            f"(run it with the owner DSN): {exc.diag.message_primary}") from exc
        schema = self._reach_schema(role)
        return schema

    def login_is_owner(self) -> bool:
        return bool(self._value("security_login_is_owner"))

    def generations(self, name: str) -> list[dict[str, Any]]:
        """The roles of token `name`, newest first."""
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(q("security_token_generations"), {"name": name}).fetchall()

    def expire(self, role: str, until: datetime) -> None:
        self.conn.execute(sql.SQL("ALTER ROLE {role} VALID UNTIL {until}").format(
            role=sql.Identifier(role), until=sql.Literal(until.isoformat())))

    def list_tokens(self) -> list[TokenRow]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(q("security_list_tokens")).fetchall()
        return [TokenRow(role=r["role_name"], name=r["token_name"], read_only=r["read_only"], archiver=r["archiver"],
                         projects=list(r["projects"]), created_by=r["created_by"], created_at=r["created_at"],
                         can_login=r["can_login"], connections=r["connections"], expires=r["expires"]) for r in rows]

    def remove_scope(self, role: str) -> None:
        """Step 1 of a revocation: no scope rows (row-level security now hides everything from the
        role, even on connections still open) and no new logins."""
        if self._value("security_delete_token", {"role": role}) is None:
            raise NotFound(f"no token named {role}")
        if self._value("security_role_exists", {"role": role}):
            self.conn.execute(sql.SQL("ALTER ROLE {role} NOLOGIN").format(role=sql.Identifier(role)))

    def terminate(self, role: str) -> int | None:
        """Step 2: end the role's open connections; None when this role may not signal them."""
        try:
            with self.conn.transaction():
                return int(self._value("security_terminate_role", {"role": role}) or 0)
        except psycopg.errors.InsufficientPrivilege:
            return None

    def drop_role(self, role: str) -> None:
        """Step 3: the role itself."""
        self.conn.execute(sql.SQL("DROP ROLE IF EXISTS {role}").format(role=sql.Identifier(role)))

    def my_token(self) -> TokenRow | None:
        """The token row of the connected role (as seen by that role)."""
        with self.conn.cursor(row_factory=dict_row) as cur:
            r = cur.execute(q("security_my_token")).fetchone()
        if r is None:
            return None
        return TokenRow(role=r["role_name"], read_only=r["read_only"], archiver=r["archiver"],
                        projects=list(r["projects"]), token_sha256=bytes(r["token_sha256"]))

    def enter(self, token: str) -> str:
        """Prove `token` in this transaction (mm_enter, migrations 0020 and 0026): its role."""
        try:
            return str(self._value("security_enter", {"token": token}))
        except psycopg.errors.UndefinedFunction as exc:
            raise Unavailable("the database schema predates migration 0020 (mm_enter): the database owner must "
                              "run `mcp-memory db migrate`") from exc
        except psycopg.Error as exc:
            if exc.sqlstate == "MM403":
                raise Forbidden("the token was not accepted (revoked, expired or mistyped)") from exc
            raise

    def whoami(self) -> tuple[str, str]:
        row = first_row(self.conn.execute(q("security_whoami")).fetchone(), "security_whoami")
        return row[0], row[1]

    def token_count(self) -> int:
        return int(self._value("security_token_count") or 0)
