"""`mcp-memory db migrate | status | partitions | stop`."""

from __future__ import annotations

import argparse
import dataclasses

from ..archive import cold
from ..config import Settings
from ..errors import Invalid, Unavailable
from ..store import embedded, migrate, partitions, partman
from ..store.db import Database, translate_errors
from .output import print_json, progress


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
    if args.db_command == "partitions":
        # the partition functions come with the schema: the embedded default is migrated first,
        # an external database behind this code is named as such
        db.ensure_schema()
        return _partitions(db, args)
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


def _partitions(db: Database, args: argparse.Namespace) -> int:
    """Create the months ahead (the maintenance run: monthly from cron, or any time), list the
    layout, retire one month or bring one back (README, "Partitions"; archive/cold.py)."""
    if args.retire and args.restore:
        raise Invalid("--retire and --restore: one at a time")
    if (args.drop or args.archive) and not (args.retire or args.restore):
        raise Invalid("--drop and --archive go with --retire (or --archive with --restore)")
    if args.drop and args.restore:
        raise Invalid("--drop goes with --retire, not --restore")
    if args.partman and (args.retire or args.restore):
        raise Invalid("--partman goes alone (with --ahead), not with --retire or --restore")
    retired: cold.ColdRetirement | None = None
    restored: cold.ColdRestore | None = None
    made: list[str] = []
    adoption: partman.Adoption | None = None
    if args.retire:
        retired = cold.retire(db, partitions.parse_month(args.retire), archive=args.archive, drop=args.drop)
    elif args.restore:
        restored = cold.restore(db, partitions.parse_month(args.restore), archive=args.archive,
                                progress=lambda done, total: progress(done, total, "restoring"))
    with db.connect(autocommit=True) as conn, translate_errors():
        if args.partman:
            adoption = partitions.adopt(conn, args.ahead)
            made = adoption.made
        elif not (retired or restored):
            made = partitions.ensure(conn, args.ahead)
        layout = partitions.layout(conn)
    if args.json:
        print_json({"created": made,
                    "retired": {**dataclasses.asdict(retired.retirement), "archive_commit": retired.archive_commit,
                                "verified_messages": retired.verified_messages} if retired else None,
                    "restored": dataclasses.asdict(restored) if restored else None,
                    "partman": dataclasses.asdict(adoption) if adoption else None,
                    "partitions": [dataclasses.asdict(p) for p in layout]})
        return 0
    if adoption:
        print(f"pg_partman (schema {adoption.schema}) keeps the months of "
              + (", ".join(adoption.adopted) + " from now on" if adoption.adopted else "these tables already"))
    for name in made:
        print(f"created {name}")
    if retired:
        result = retired.retirement
        print(f"retired {result.month}: {result.sessions} sessions, {result.messages} messages; "
              + ("dropped " if result.dropped else "detached (kept as tables) ") + ", ".join(result.detached))
        if retired.archive_commit:
            print(f"  verified against archive commit {retired.archive_commit} ({retired.verified_messages} lines)")
    if restored:
        how = ("attached again" if restored.attached else
               f"filled from the archive: {restored.messages} messages, {restored.indexed} indexed for search")
        print(f"restored {restored.month}: {restored.sessions} sessions; {how} ({', '.join(restored.parts)})")
    for p in layout:
        print(f"  {p.table:<20} {p.name:<34} {p.bound:<52} ~{max(p.rows, 0)} rows")
    return 0


def _stop(settings: Settings) -> int:
    if not settings.embedded:
        raise Invalid("db stop only stops the embedded server; this profile uses an external database")
    result = embedded.stop_and_hold(settings.embedded_dir)
    if result.restarted_by is not None:
        raise Unavailable(f"the embedded server was stopped, but another process started it again at once "
                          f"(postmaster pid {result.restarted_by}); stop the mcp-memory processes of this profile first")
    print("embedded server stopped; it starts again on demand: at the next call of a running mcp-memory process "
          "(serve, serve-http, an archiver) or at any new command" if result.was_running
          else "embedded server was not running")
    return 0
