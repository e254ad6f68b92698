"""`mcp-memory sync AGENT`: incremental, idempotent capture of an agent's current session.

Run from agent hooks, so it must be quick and must never fail the agent: with `--hook` every error
is logged and the exit code is 0. What cannot be stored now (database unreachable) is written to a
spool file and delivered by the next run, before anything new.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import agents
from ..agents.base import FormatError
from ..config import Settings
from ..errors import Invalid, McpMemoryError, Unavailable
from ..spool import Spool
from .output import print_json, service

log = logging.getLogger(__name__)


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
    from ..core.imports import store_sessions

    settings = replace(settings, connect_timeout=min(settings.connect_timeout, 2.0))
    sessions, key, cursor_after = _read_new(settings, args, payload)
    spool = Spool(settings.data_dir / "spool")
    results: list = []
    try:
        with service(settings) as svc:
            for pending in spool.pending():
                results.extend(store_sessions(svc, pending.sessions, project_id=pending.project))
                pending.delivered()
            results.extend(store_sessions(svc, sessions, project_id=args.project))
    except Unavailable as exc:
        spool.add(sessions, project=args.project)
        log.warning("database unreachable, %d session(s) spooled for the next sync: %s", len(sessions), exc)
    _save_cursor(settings, key, cursor_after)
    if args.json:
        print_json({"sessions": [r.to_dict() for r in results], "spooled": spool.count()})
    elif not args.hook:
        for r in results:
            print(f"{r.native_id} → {r.session_id}: {r.new} new, {r.duplicates} already stored"
                  + (f" (error: {r.error})" if r.error else ""))
    return 1 if any(r.error for r in results) and not args.hook else 0


def _read_new(settings: Settings, args: argparse.Namespace, payload: dict[str, Any]):
    try:
        target = agents.get(args.agent).capture_target(path=args.path, session=args.session, hook=payload,
                                                       environ=os.environ)
    except FormatError as exc:
        raise Invalid(str(exc)) from None
    sessions, cursor = target.read(_load_cursor(settings, target.key))
    return sessions, target.key, cursor


def _cursor_file(settings: Settings, key: str) -> Path:
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return settings.data_dir / "sync" / f"{digest}.json"


def _load_cursor(settings: Settings, key: str) -> dict[str, Any] | None:
    path = _cursor_file(settings, key)
    try:
        return json.loads(path.read_text())["cursor"]
    except (OSError, ValueError, KeyError):
        return None


def _save_cursor(settings: Settings, key: str, cursor: dict[str, Any]) -> None:
    path = _cursor_file(settings, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "cursor": cursor}))
    os.replace(tmp, path)


LAST_RUN = "sync-last.json"  # the outcome of the last hook run, for `doctor`


def _record_outcome(settings: Settings, exc: BaseException | None) -> None:
    """What the last hook run did: `doctor` reports a refused credential (a revoked or expired token:
    nothing was stored or spooled, the hook reads the same turns again once a valid token is stored)."""
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
