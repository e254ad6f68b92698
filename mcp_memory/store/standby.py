"""A standby given as the primary's DSN is refused on first connect, in words that say what to do
(instead of the generic failure of the first write and of LISTEN)."""

from __future__ import annotations

import psycopg

from ..config import Settings
from ..errors import Unavailable


class StandbyAsPrimary(Unavailable):
    """The DSN of the primary reaches a hot standby (`[unavailable]`: no retry helps until the
    configuration changes, or the standby is promoted)."""


def standby_refused(settings: Settings) -> StandbyAsPrimary:
    """What a standby given as the DSN gets, on first connect (store/db.py ensure_schema)."""
    where = {"flag": "--dsn", "env": "MCP_MEMORY_DSN"}.get(settings.dsn_source, "[database] dsn")
    named = "[database] dsn" if where == "[database] dsn" else f"[database] dsn (here {where})"
    return StandbyAsPrimary(f"{named} points at a read-only standby (pg_is_in_recovery() is true): writes and LISTEN "
                       "cannot run there. Give the primary as [database] dsn and this server as "
                       "[database] read_dsn")


def check_not_standby(conn: psycopg.Connection, settings: Settings) -> None:
    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    if row is not None and row[0]:
        raise standby_refused(settings)
