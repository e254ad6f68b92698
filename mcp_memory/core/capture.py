"""Capture (`mcp-memory sync AGENT`): what is new in an agent's current session, stored idempotently.

The agent locates its session (`Agent.capture_target`: the hook's JSON, a path, a session id) and
reads only what is new since the cursor this machine kept for it (a small file under the data
folder). What cannot be stored now (database unreachable) is spooled (spool.py) and delivered by
the next run, before anything new; the cursor moves on either way, so nothing is read twice and
nothing is dropped. A refused credential (revoked, expired) stores, spools and moves nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import agents
from ..config import Settings
from ..errors import Invalid, Unavailable
from ..host_report import report_spool
from ..results import Imported
from ..spool import Spool
from .imports import store_sessions

if TYPE_CHECKING:
    from .service import Service

log = logging.getLogger(__name__)


@dataclass
class Captured:
    sessions: list[Imported] = field(default_factory=list)  # stored now (spooled ones first)
    spooled: int = 0  # sessions waiting in the spool after this run


def capture(
    settings: Settings, open_service: Callable[[], AbstractContextManager[Service]], *, agent: str,
    path: Path | None, session: str | None, hook: Mapping[str, Any], project: str | None,
    environ: Mapping[str, str],
) -> Captured:
    """Read what is new in the agent's current session and store it (after what the spool holds)."""
    try:
        target = agents.get(agent).capture_target(path=path, session=session, hook=hook, environ=environ)
    except agents.FormatError as exc:
        raise Invalid(str(exc)) from None
    sessions, cursor = target.read(load_cursor(settings, target.key))
    spool = Spool(settings.data_dir / "spool")
    result = Captured()
    try:
        with open_service() as svc, reporting(svc, spool):
            for pending in spool.pending():
                result.sessions.extend(store_sessions(svc, pending.sessions, project_id=pending.project))
                pending.delivered()
            result.sessions.extend(store_sessions(svc, sessions, project_id=project))
    except Unavailable as exc:
        spool.add(sessions, project=project)
        log.warning("database unreachable, %d session(s) spooled for the next sync: %s", len(sessions), exc)
    save_cursor(settings, target.key, cursor)
    result.spooled = spool.count()
    return result


@contextmanager
def reporting(svc: Service, spool: Spool) -> Iterator[None]:
    """Report what the spool still holds to the database once the run is over (for /metrics), also
    when delivering failed on something else than the database being away (a spool file that
    cannot be read stays, and the report says so); never when the database is unreachable."""
    try:
        yield
    except Unavailable:
        raise
    except BaseException:
        report_spool(svc.db, spool.folder)
        raise
    report_spool(svc.db, spool.folder)


def cursor_file(settings: Settings, key: str) -> Path:
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return settings.data_dir / "sync" / f"{digest}.json"


def load_cursor(settings: Settings, key: str) -> dict[str, Any] | None:
    try:
        cursor: dict[str, Any] = json.loads(cursor_file(settings, key).read_text())["cursor"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return cursor


def save_cursor(settings: Settings, key: str, cursor: dict[str, Any]) -> None:
    path = cursor_file(settings, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "cursor": cursor}))
    os.replace(tmp, path)
