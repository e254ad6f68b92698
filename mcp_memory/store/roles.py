"""A view of the shared pool that runs every transaction as one token role.

REST serves every token on the server's own pool (http/auth.py). Each transaction starts with
`mm_enter(token)` (migrations 0020, 0026): the database checks the token's digest and stores this
transaction's proof, which names the role; every policy and write function then asks mm_caller(),
which answers that role. A gateway login is a member of no token role (it cannot become one, nor
alter one), and without the token — a leaked password alone — it is nobody to row-level security.
An owner login (`serve-http --as-owner`) also switches to the role for the transaction (SET LOCAL
ROLE), so that its own rights are not the token's. The proof ends with the transaction; a revoked
or expired token gets none and the request is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from ..errors import Unavailable
from ..security.tokens import Unauthorized
from .db import Database
from .security_store import SecurityStore
from .sql import q


class RoleDatabase(Database):
    def __init__(self, shared: Database, role: str, token: str) -> None:
        super().__init__(shared.settings, application_name=shared.application_name)
        self.shared = shared
        self.role = role
        self.token = token  # kept for the proof of every transaction (only its holder sent it)

    @property
    def kind(self) -> str:
        return self.shared.kind

    def dsn(self) -> str:
        return self.shared.dsn()

    def pool(self) -> ConnectionPool:
        return self.shared.pool()

    def reset(self) -> None:
        self.shared.reset()

    @contextmanager
    def transaction(self, *, bounded: bool = True) -> Iterator[psycopg.Connection]:
        with self.shared.transaction(bounded=bounded) as conn:
            self._enter(conn)
            yield conn

    def connect(self, **kwargs: object) -> psycopg.Connection:
        """A connection of its own (the append listener's LISTEN). A gateway login stays itself on it
        (nobody without a transaction's proof); an owner login takes the role for the connection."""
        conn = self.shared.connect(**kwargs)
        try:
            if SecurityStore(conn).login_is_owner():
                self._set_role(conn)
            if not conn.autocommit:
                conn.commit()  # a session-level SET survives the commit (not a rollback)
        except BaseException:
            conn.close()
            raise
        return conn

    def _enter(self, conn: psycopg.Connection) -> None:
        """The proof of this transaction and the switch to the role, one round trip."""
        try:
            row = conn.execute("SELECT mm_enter(%s)", (self.token,)).fetchone()
        except psycopg.errors.UndefinedFunction as exc:
            raise Unavailable("the database schema predates migration 0020 (mm_enter): the database owner must "
                              "run `mcp-memory db migrate`") from exc
        except psycopg.errors.InsufficientPrivilege as exc:
            raise Unavailable("the server's database login may not prove tokens (mm_enter): make it with "
                              "`mcp-memory token gateway`, or run `mcp-memory db migrate` as the owner") from exc
        except psycopg.Error as exc:
            if exc.sqlstate == "MM403":  # revoked, expired or unknown
                raise Unauthorized("the token was not accepted (revoked, expired or mistyped)") from exc
            raise
        if not row or row[0] != self.role:
            raise Unauthorized("the token was not accepted (revoked, expired or mistyped)")

    def _set_role(self, conn: psycopg.Connection) -> None:
        try:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(self.role)))
        except psycopg.errors.InvalidParameterValue as exc:  # the role was dropped: a revoked token
            raise Unauthorized("the token was not accepted (revoked, expired or mistyped)") from exc
        except psycopg.errors.InsufficientPrivilege as exc:
            raise Unavailable(f"the owner login may not act as token role {self.role} "
                              "(grant it: GRANT <role> TO <owner login> WITH SET TRUE)") from exc

    def close(self) -> None:
        for finish in self._before_close:
            finish()  # the indexer; the pool belongs to the shared database


def token_accepted(db: Database, role: str, digest: bytes) -> bool:
    """True when `digest` is the SHA-256 of `role`'s token and the role may still log in. Asked of
    the database (mm_check_token), so the server's login needs to read no table."""
    with db.transaction() as conn:
        row = conn.execute(q("security_check_token"), {"role": role, "digest": digest}).fetchone()
    return bool(row and row[0])
