"""What a host reports of itself to the central database, for `/metrics` (install/README.md,
Monitoring): how many capture spool files it holds and since when. Only the host can see its spool;
a capture run that reached the database tells it through mm_report_host (migration 0018), which
records it for the token's own role. Best effort: a report that fails never fails the capture.
"""

from __future__ import annotations

import logging
import re
import socket
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from .errors import McpMemoryError
from .store.db import Database

log = logging.getLogger(__name__)
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9._@:-]")


def host_name() -> str:
    """This machine's name in the form mm_report_host accepts (1-200 of A-Z a-z 0-9 . _ @ : -)."""
    name = _NOT_ALLOWED.sub("-", socket.gethostname())[:200].lstrip("._@:-")
    return name or "unnamed-host"


def spool_state(folder: Path) -> tuple[int, datetime | None]:
    """The number of spool files (those set aside as unreadable included: not delivered either) and
    when the oldest was written (from its name: the nanoseconds spool.py starts it with; the file's
    mtime where a name does not start so)."""
    if not folder.is_dir():
        return 0, None
    files = sorted([*folder.glob("[0-9]*.json"), *folder.glob("[0-9]*.json.unreadable")], key=lambda p: p.name)
    if not files:
        return 0, None
    stamp = files[0].name.split("-", 1)[0]
    try:
        seconds = int(stamp) / 1e9 if stamp.isdigit() else files[0].stat().st_mtime
    except OSError:  # delivered meanwhile
        return len(files), None
    return len(files), datetime.fromtimestamp(seconds, UTC)


def report_spool(db: Database, folder: Path) -> bool:
    """Report this host's spool; False (and a warning in the log) when the database did not take it,
    e.g. a schema older than migration 0018 or a read-only token."""
    count, oldest = spool_state(folder)
    try:
        with db.transaction() as conn:
            exists = conn.execute("SELECT to_regprocedure('mm_report_host(text, integer, timestamptz)') IS NOT NULL")
            row = exists.fetchone()
            if not (row and row[0]):
                log.debug("host report skipped: the schema has no mm_report_host (run `mcp-memory db migrate`)")
                return False
            conn.execute("SELECT mm_report_host(%s, %s, %s)", (host_name(), count, oldest))
    except (McpMemoryError, psycopg.Error) as exc:
        log.warning("could not report this host's spool (%d file(s)) to the database: %s", count, exc)
        return False
    return True
