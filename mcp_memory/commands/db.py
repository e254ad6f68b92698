"""`mcp-memory db migrate | status | stop`."""

from __future__ import annotations

import argparse

from ..config import Settings
from ..errors import Invalid, Unavailable
from ..store import embedded, migrate
from ..store.db import Database
from .output import print_json


def run(settings: Settings, args: argparse.Namespace) -> int:
    if args.db_command == "stop":
        return _stop(settings)
    db = Database(settings, application_name="mcp-memory db")
    if args.db_command == "migrate":
        applied = migrate.migrate(db.dsn())
        for m in applied:
            print(f"applied {m.version:04d}_{m.name}")
        print(f"schema at version {migrate.latest_version()} on {db.masked_dsn()}"
              + ("" if applied else " (already up to date)"))
        return 0
    with db.connect(autocommit=True) as conn:
        states = migrate.status(conn)
    if args.json:
        print_json({"dsn": db.masked_dsn(), "migrations": [
            {"version": s.version, "name": s.name, "applied_at": s.applied_at.isoformat() if s.applied_at else None,
             "checksum_ok": s.checksum_ok} for s in states]})
        return 0
    print(f"database: {db.masked_dsn()}")
    for s in states:
        state = f"applied {s.applied_at:%Y-%m-%d %H:%M:%S}" if s.applied_at else "pending"
        warn = "" if s.checksum_ok else "  (file changed since it was applied!)"
        print(f"  {s.version:04d}_{s.name:<30} {state}{warn}")
    return 0


def _stop(settings: Settings) -> int:
    if not settings.embedded:
        raise Invalid("db stop only stops the embedded server; this profile uses an external database")
    result = embedded.stop_and_hold(settings.embedded_dir)
    if result.restarted_by is not None:
        raise Unavailable(f"the embedded server was stopped, but another process started it again at once "
                          f"(postmaster pid {result.restarted_by}); stop the mcp-memory processes of this profile first")
    print("embedded server stopped; running mcp-memory processes will not restart it (a new command starts it again)"
          if result.was_running else "embedded server was not running")
    return 0
