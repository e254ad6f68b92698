"""Capture (`mcp-memory sync AGENT`): what is new in an agent's current session, stored idempotently.

The agent locates its session (`Agent.capture_target`: the hook's JSON, a path, a session id) and
reads only what is new since the cursor this machine kept for it (a small file under the data
folder). What cannot be stored now is spooled (spool.py) with the reason — the database is
unreachable, or it refused the session (most often: its project, core/projects.py, is not one this
token may write) — and delivered by a later run, before anything new; the cursor moves on either
way, so nothing is read twice and nothing is dropped. A refused credential (revoked, expired) is
no outage, but what was read is kept the same way, with the `[forbidden]` reason, and the run
still fails with it (the hook says so, `doctor` reports it): the first run with a valid token
delivers it.
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
from ..errors import Invalid, Unauthorized, Unavailable
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
    kept: list[Imported] = field(default_factory=list)  # refused now, kept in the spool (their error says why)
    spooled: int = 0  # spool files waiting after this run


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
            deliver(svc, spool, result)
            stored = store_sessions(svc, sessions, project_id=project, whole=False)
            for neutral, imported in zip(sessions, stored, strict=True):
                if imported.error is None:
                    result.sessions.append(imported)
                elif neutral.messages:  # a refused read with nothing new loses nothing: the spool has the rest
                    spool.add([neutral], project=project, reason=imported.error)
                    result.kept.append(imported)
    except Unavailable as exc:
        spool.add(sessions, project=project, reason=f"the database was unreachable: {exc}")
        log.warning("database unreachable, %d session(s) spooled for the next sync: %s", len(sessions), exc)
    except Unauthorized as exc:  # kept (appends are idempotent: what was stored before it is a duplicate then)
        spool.add(sessions, project=project, reason=exc.render())
        save_cursor(settings, target.key, cursor)
        waiting = spool.count()
        raise Unauthorized(f"{exc}; {len(sessions)} session(s) read now kept in the spool ({waiting} file(s) wait), "
                           "delivered by the next run once a valid token is set (`mcp-memory login`)") from exc
    save_cursor(settings, target.key, cursor)
    result.spooled = spool.count()
    return result


def deliver(svc: Service, spool: Spool, result: Captured) -> None:
    """Store what the spool holds, oldest first; what the database refuses again stays, with the new
    reason (a project mapped since then resolves anew: spooled sessions keep their own folder)."""
    for pending in spool.pending():
        stored = store_sessions(svc, pending.sessions, project_id=pending.project, whole=False)
        result.sessions.extend(r for r in stored if r.error is None)
        refused = [(s, r) for s, r in zip(pending.sessions, stored, strict=True) if r.error is not None]
        result.kept.extend(r for _, r in refused)
        pending.refused([s for s, _ in refused], refused[0][1].error or "" if refused else "")


@contextmanager
def reporting(svc: Service, spool: Spool) -> Iterator[None]:
    """Report what the spool still holds to the database once the run is over (for /metrics), also
    when delivering failed on something else than the database being away (a spool file that
    cannot be read stays, and the report says so); never when the database is unreachable or
    refused the login (the report could not be written either)."""
    try:
        yield
    except (Unavailable, Unauthorized):
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
