"""`mcp-memory sync AGENT`: incremental, idempotent capture of an agent's current session
(core/capture.py). Run from agent hooks, so it must be quick and must never fail the agent: with
`--hook` every error is logged and the exit code is 0."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from typing import Any

from ..config import Settings
from ..errors import McpMemoryError
from .output import print_json, service


def sync(settings: Settings, args: argparse.Namespace) -> int:
    if not args.hook:
        return _sync(settings, args, payload={})
    try:
        payload = json.loads(sys.stdin.read() or "{}")
        _sync(settings, args, payload=payload)
        _record_outcome(settings, None)
        return 0
    except Exception as exc:  # a hook must never fail or block the agent: log and move on
        _log_failure(settings, exc)
        _record_outcome(settings, exc)
        return 0


def _sync(settings: Settings, args: argparse.Namespace, *, payload: dict[str, Any]) -> int:
    from ..core.capture import capture

    settings = replace(settings, connect_timeout=min(settings.connect_timeout, 2.0))
    result = capture(settings, lambda: service(settings), agent=args.agent, path=args.path, session=args.session,
                     hook=payload, project=args.project, environ=os.environ)
    for r in result.kept:  # one line each, also from a hook: nothing is dropped silently
        print(f"mcp-memory sync: {r.agent} session {r.native_id} kept in the spool: {r.error} "
              "(see `mcp-memory spool list`; `mcp-memory projects map FOLDER PROJECT` sends a folder elsewhere)",
              file=sys.stderr)
    if args.json:
        print_json({"sessions": [r.to_dict() for r in result.sessions], "kept": [r.to_dict() for r in result.kept],
                    "spooled": result.spooled})
    elif not args.hook:
        for r in result.sessions:
            print(f"{r.native_id} → {r.session_id} (project {r.project_id}, rule: {r.project_rule}): "
                  f"{r.new} new, {r.duplicates} already stored")
    return 1 if result.kept and not args.hook else 0


LAST_RUN = "sync-last.json"  # the outcome of the last hook run, for `doctor`


def _record_outcome(settings: Settings, exc: BaseException | None) -> None:
    """What the last hook run did: `doctor` reports a refused credential (a revoked or expired token:
    nothing was stored, what was read waits in the spool until a valid token is stored)."""
    state = {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "ok": exc is None,
             "code": exc.code if isinstance(exc, McpMemoryError) else (None if exc is None else "internal"),
             "error": None if exc is None else (str(exc) if isinstance(exc, McpMemoryError) else type(exc).__name__)}
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = settings.data_dir / f".{LAST_RUN}.tmp"
        tmp.write_text(json.dumps(state))
        os.replace(tmp, settings.data_dir / LAST_RUN)
    except OSError:
        pass


def _log_failure(settings: Settings, exc: BaseException) -> None:
    text = exc.render() if isinstance(exc, McpMemoryError) else f"{type(exc).__name__}: {exc}"
    print(f"mcp-memory sync: {text}", file=sys.stderr)
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        with open(settings.data_dir / "sync.log", "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")
    except OSError:
        pass
