"""`mcp-memory archive …` (the git export loop, status, retry, verify) and `mcp-memory restore`."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config import Settings
from .output import print_json, progress

if TYPE_CHECKING:
    from ..archive.daemon import Archiver
    from ..metrics import MetricsServer
    from ..store.db import Database


def add_parsers(sub: argparse._SubParsersAction) -> None:
    archive = sub.add_parser(
        "archive", help="git archive of snapshots: export loop, status, retry, verify",
        description="Export snapshots to a git repository (sessions/<id>.jsonl, decisions/<id>.jsonl, "
        "context/<id>.jsonl; one commit and tag per snapshot); the automatic snapshot policy ([archive] "
        "auto_snapshot…) snapshots idle or long sessions that changed since their last snapshot. "
        "Examples:\n"
        "  mcp-memory archive --daemon --repo ~/mcp-archive --remote git@host:me/archive.git\n"
        "  mcp-memory archive --once --repo ~/mcp-archive\n"
        "  mcp-memory archive status --json\n  mcp-memory archive retry --failed\n"
        "  mcp-memory archive verify --repo ~/mcp-archive",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = archive.add_mutually_exclusive_group()
    mode.add_argument("--daemon", action="store_true", help="run until stopped (SIGTERM/SIGINT); standby when "
                      "another archiver is active")
    mode.add_argument("--once", action="store_true", help="export the pending snapshots, then exit")
    _repo_flags(archive, None, remote=True)
    archive.add_argument("--metrics-port", type=int, metavar="N", help="serve GET /metrics (Prometheus text "
                         "format: queue depth, oldest pending job, failed jobs, export lag, connections, this "
                         "archiver's counts) on this port while running; 0 picks a free port")
    archive.add_argument("--metrics-host", default="127.0.0.1", metavar="ADDRESS",
                         help="address of the /metrics server (default 127.0.0.1)")
    archive.add_argument("--crash-at", help=argparse.SUPPRESS)  # crash tests only: SIGKILL at a named point
    actions = archive.add_subparsers(dest="archive_action", metavar="ACTION")
    status = actions.add_parser("status", help="active archiver, queue depth, oldest pending job, failures")
    status.add_argument("--json", action="store_true", help="print one JSON document")
    status.add_argument("--repo", metavar="PATH", default=argparse.SUPPRESS,
                        help="also check this archive repository (else [archive] repo, when set) for content "
                        "the archiver refuses: symbolic links, submodules, files outside the layout")
    retry = actions.add_parser("retry", help="re-queue failed export jobs")
    which = retry.add_mutually_exclusive_group(required=True)
    which.add_argument("--job", type=int, metavar="ID", help="re-queue this job")
    which.add_argument("--failed", action="store_true", help="re-queue every failed job")
    verify = actions.add_parser("verify", help="compare the archive (any clone; one with a remote is fetched "
                                "first) with the database; exit 1 on any difference")
    _repo_flags(verify, argparse.SUPPRESS, remote=False)
    verify.add_argument("--json", action="store_true", help="print one JSON document")
    verify.add_argument("--repair", action="store_true", help="re-tag each snapshot whose tag holds lines beyond "
                        "its seq (written by earlier versions); the archiver's next push publishes the tags")

    restore = sub.add_parser(
        "restore", help="rebuild sessions, messages, snapshots, lineage, decisions (every version) and context "
        "from a git archive",
        description="Every valid session is restored; a bad line (edited, out of order, unreadable) ends its "
        "session there and is listed as file:line with the reason; the exit code is then 1. "
        "Example: mcp-memory --dsn postgresql://…/new_db restore --from-archive ~/mcp-archive")
    restore.add_argument("--from-archive", required=True, metavar="PATH", help="the archive: a clone (any checked-out branch), a bare repository or a git URL "
                         "(cloned to a temporary folder, removed afterwards)")
    restore.add_argument("--force", action="store_true", help="restore into a database that already has sessions "
                         "(existing rows are kept; only missing ones are added)")
    restore.add_argument("--json", action="store_true", help="print one JSON document (bad_lines: file, line, why)")


def _repo_flags(parser: argparse.ArgumentParser, default: object, *, remote: bool) -> None:
    # SUPPRESS on a sub-action keeps a --repo given before the action (`archive --repo X verify`).
    parser.add_argument("--repo", metavar="PATH", default=default,
                        help="archive repository (created if missing); else [archive] repo in the config")
    if remote:
        parser.add_argument("--remote", metavar="URL", default=default,
                            help="git remote to push to (any git URL); else [archive] remote in the config")


def handlers() -> dict[str, Callable[..., int]]:
    return {"archive": archive, "restore": restore}


def archive(settings: Settings, args: argparse.Namespace) -> int:
    action = args.archive_action
    if action is None and not (args.daemon or args.once):
        print("mcp-memory archive: say what to do: --daemon, --once, status, retry or verify "
              "(mcp-memory archive --help)", file=sys.stderr)
        return 2
    from ..store.db import Database

    db = Database(settings, application_name="mcp-memory archive")
    try:
        if action == "status":
            return _status(db, settings, args)
        if action == "retry":
            return _retry(db, args)
        if action == "verify":
            return _verify(db, settings, args)
        return _run(db, settings, args)
    finally:
        db.close()


def _run(db: Database, settings: Settings, args: argparse.Namespace) -> int:
    from ..archive.daemon import Archiver, stop_on_signals, worker_name
    from ..archive.options import ArchiverOptions

    options = ArchiverOptions.resolve(settings, repo=args.repo, remote=args.remote)
    if not args.verbose:
        logging.getLogger("mcp_memory").setLevel(logging.INFO)
    db.application_name = f"mcp-memory archiver {worker_name()}"[:63]
    archiver = Archiver(db, options, crash_at=args.crash_at)
    server = _metrics_server(db, archiver, args)
    try:
        with stop_on_signals(archiver):
            summary = archiver.run(once=args.once)
    finally:
        if server is not None:
            server.close()
    if args.once:
        made = f", {summary.auto_snapshots} made by the automatic snapshot policy" if summary.auto_snapshots else ""
        if summary.renumbered:  # after a point-in-time restore (install/README.md, section 9)
            made += f", {summary.renumbered} renumbered past the archive's highest tag"
        print(f"exported {summary.exported} snapshot(s) ({summary.lines} new line(s){made}) to {options.repo}; "
              f"{summary.done} done, {summary.retrying} to retry, {summary.failed} failed")
        for error in summary.errors:
            print(f"  {error}", file=sys.stderr)
        if summary.failed or summary.retrying:  # cron and systemd must see that snapshots are not archived
            print(f"mcp-memory archive: {summary.failed} job(s) failed, {summary.retrying} left to retry "
                  "(mcp-memory archive status; archive retry --failed)", file=sys.stderr)
            return 1
    return 0


def _metrics_server(db: Database, archiver: Archiver, args: argparse.Namespace) -> MetricsServer | None:
    from ..errors import Invalid
    from ..metrics import MetricsServer, Registry, archive_samples, cached, pool_samples

    if args.metrics_port is None:
        return None
    if not 0 <= args.metrics_port <= 65535:
        raise Invalid(f"--metrics-port must be 0 to 65535, got {args.metrics_port}")
    metrics = Registry()
    metrics.collect(cached(lambda: archive_samples(db)))
    metrics.collect(lambda: pool_samples(db, "archiver"))
    metrics.collect(archiver.metric_samples)
    try:
        server = MetricsServer(metrics, args.metrics_host, args.metrics_port).start()
    except OSError as exc:
        raise Invalid(f"--metrics-port {args.metrics_port}: cannot listen on {args.metrics_host}: {exc}") from None
    logging.getLogger("mcp_memory").info("metrics at http://%s:%d/metrics", args.metrics_host, server.port)
    return server


def _status(db: Database, settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..archive import queue

    path = getattr(args, "repo", None) or settings.archive.get("repo")
    state = queue.status(db, repo=Path(str(path)).expanduser().resolve() if path else None)
    if args.json:
        print_json(state.to_json())
    else:
        print("\n".join(state.lines()))
    return 0


def _retry(db: Database, args: argparse.Namespace) -> int:
    from ..archive import queue

    requeued = queue.retry(db, job_id=args.job)
    print(f"re-queued {len(requeued)} job(s)" + (f": {', '.join(map(str, requeued))}" if requeued else ""))
    return 0


def _verify(db: Database, settings: Settings, args: argparse.Namespace) -> int:
    from ..archive import verify
    from ..archive.options import ArchiverOptions

    options = ArchiverOptions.resolve(settings, repo=getattr(args, "repo", None))
    report = verify.verify(db, options.repo, repair=args.repair)
    if args.json:
        print_json(report.to_json())
    else:
        print("\n".join(report.lines()))
    return 0 if report.ok else 1


def restore(settings: Settings, args: argparse.Namespace) -> int:
    from ..archive import restore as restoring
    from ..store.db import Database

    db = Database(settings, application_name="mcp-memory restore")
    try:
        result = restoring.restore(db, args.from_archive, force=args.force,
                                   progress=lambda done, total: progress(done, total, "restoring"))
    finally:
        db.close()
    if args.json:
        print_json(result.to_json())
    else:
        print(result.line())
        for warning in result.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        for bad in result.bad_lines:
            print(f"bad line: {bad}", file=sys.stderr)
    return 0 if result.ok else 1
