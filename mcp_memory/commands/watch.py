"""`mcp-memory watch AGENT`: capture by polling, for agents whose hooks cannot be used.

Some agents offer no hook we can rely on (HermesAgent's shell hooks need the user's approval and are
skipped silently in non-interactive runs; other agents have none at all). The watcher runs the same
incremental capture as `mcp-memory sync AGENT` (core/capture.py: same cursor, same spool), every
`--interval` seconds, but only after one of the agent's store files changed size or time
(`Agent.watched_files`), so an idle agent costs a few `stat` calls and no database connection.
It never stops on an error (a missing store, a database that is down): it says so and tries again
next round. SIGTERM or SIGINT end it cleanly, with exit code 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import agents
from ..config import Settings
from ..errors import Invalid, McpMemoryError
from .output import service

log = logging.getLogger(__name__)
Signature = tuple[tuple[str, int, int], ...]


def add_parsers(sub: Any) -> None:
    watch_ = sub.add_parser(
        "watch", help="capture an agent's sessions by polling its store (when its hooks cannot be used)",
        description="Example: mcp-memory watch hermes --interval 10. Runs until SIGTERM or Ctrl-C.")
    watch_.add_argument("agent", choices=agents.names())
    watch_.add_argument("--interval", type=float, default=10.0, help="seconds between checks (default 10)")
    watch_.add_argument("--path", type=Path, help="the agent's session store (default: where the agent keeps it)")
    watch_.add_argument("--session", help="only this session (agents whose store holds many)")
    watch_.add_argument("--project", help="project id (default: from each session's cwd)")
    watch_.add_argument("--once", action="store_true", help="one round, then exit")


def handlers() -> dict[str, Callable[..., int]]:
    return {"watch": watch}


def watch(settings: Settings, args: argparse.Namespace) -> int:
    if not 0.05 <= args.interval <= 86400:
        raise Invalid("--interval must be between 0.05 and 86400 seconds")
    agent = agents.get(args.agent)
    settings = replace(settings, connect_timeout=min(settings.connect_timeout, 5.0))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    seen: Signature | None = None
    print(f"mcp-memory watch {args.agent}: checking every {args.interval:g}s", flush=True)
    while not stop.is_set():
        now = signature(agent.watched_files(path=args.path, environ=os.environ))
        if now is None or now != seen:
            seen = now if capture_round(settings, args) else None
        if args.once or stop.wait(args.interval):
            break
    return 0


def signature(files: list[Path]) -> Signature | None:
    """Size and time of each existing file; None when the agent names no files (capture every round)."""
    if not files:
        return None
    stats = []
    for path in files:
        try:
            stat = path.stat()
        except OSError:
            continue
        stats.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(stats)


def capture_round(settings: Settings, args: argparse.Namespace) -> bool:
    """One capture; True when everything is stored (nothing left in the spool), so the next round
    may wait for a change. Errors are reported and retried, never raised."""
    from ..core.capture import capture

    try:
        result = capture(settings, lambda: service(settings), agent=args.agent, path=args.path,
                         session=args.session, hook={}, project=args.project, environ=os.environ)
    except McpMemoryError as exc:
        print(f"mcp-memory watch: {exc.render()}", file=sys.stderr, flush=True)
        return False
    except Exception as exc:  # noqa: BLE001 - a watcher outlives one bad round; the next one retries
        log.exception("capture round failed")
        print(f"mcp-memory watch: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return False
    for r in result.sessions:
        if r.new or r.error:
            print(f"{r.native_id} → {r.session_id}: {r.new} new" + (f" (error: {r.error})" if r.error else ""),
                  flush=True)
    if result.spooled:
        print(f"mcp-memory watch: database unreachable, {result.spooled} session(s) spooled", file=sys.stderr,
              flush=True)
    return not result.spooled and not any(r.error for r in result.sessions)
