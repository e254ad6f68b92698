"""Server health for `mcp-memory doctor`: how many connection slots are left."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from .sql import q

LOW_SHARE = 0.8  # warn once this share of the usable slots is taken


@dataclass(frozen=True)
class Connections:
    max_connections: int
    reserved: int
    used: int
    top_holders: str

    @property
    def usable(self) -> int:
        """Slots a non-superuser (every token role, every host) can get."""
        return max(0, self.max_connections - self.reserved)

    @property
    def low(self) -> bool:
        return self.used >= LOW_SHARE * self.usable


def connections(conn: psycopg.Connection) -> Connections:
    row = conn.execute(q("health_connections")).fetchone()
    if row is None:  # one row always comes back; this keeps the type exact
        raise RuntimeError("health_connections returned no row")
    return Connections(max_connections=row[0], reserved=row[1], used=row[2], top_holders=row[3] or "")


def backends_hidden(conn: psycopg.Connection) -> bool | None:
    """True when pg_stat_activity and pg_terminate_backend are the owner's only in this database
    (migration 0026, or install/pgbouncer/auth_query.sql); None on a schema before 0026."""
    row = conn.execute(q("health_backends_hidden")).fetchone()
    return None if row is None or row[0] is None else bool(row[0])
