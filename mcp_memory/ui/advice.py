"""Plain words on the health page for what the numbers alone do not say: why the export queue does
not drain. Jobs are only taken by `mcp-memory archive`; with none running (no archiver seen, or the
last one gone), snapshots queue up forever and nothing reaches the git archive."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..schema import format_time

RUN = "mcp-memory archive --daemon --repo PATH"
ONCE = "mcp-memory archive --once --repo PATH"
SERVICE = "install/README.md, “Archiver host”"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def queue_advice(queue: dict[str, int], archivers: list[dict[str, Any]], oldest: datetime | None) -> str | None:
    """Why waiting export jobs do not move, and what to run; None when nothing waits or an archiver
    holds the lease."""
    waiting = queue.get("pending", 0) + queue.get("running", 0)
    if not waiting:
        return None
    alive = [a for a in archivers if a.get("alive")]
    if any(a.get("leader") for a in alive):
        return None
    since = f" (the oldest since {format_time(oldest)})" if oldest is not None else ""
    jobs = f"{waiting} export job{'s' if waiting != 1 else ''} wait{'s' if waiting == 1 else ''}{since}"
    if alive:
        names = ", ".join(sorted({_shown(a.get("worker")) for a in alive}))
        return (f"{jobs}. Archiver(s) {names} are connected but none holds the lease yet; if this lasts, "
                "`mcp-memory archive status` says who holds it and why.")
    if archivers:
        last = max(archivers, key=lambda a: a.get("last_seen") or EPOCH)
        seen = format_time(last["last_seen"]) if last.get("last_seen") else "some time ago"
        gone = (f"The last archiver ({_shown(last.get('worker'))}, role {_shown(last.get('role_name'))}) was seen "
                f"{seen} and is gone")
    else:
        gone = "No archiver has been seen on this database"
    return (f"{jobs}, and nothing takes them: {gone}. Jobs are exported only by `mcp-memory archive`. Start it "
            f"on the host that keeps the archive repository: `{RUN}` (as a service: {SERVICE}), or export "
            f"what waits once with `{ONCE}`.")


def _shown(value: Any, limit: int = 80) -> str:
    """An archiver's self-chosen worker name, printable and short (doctor prints it on a terminal)."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= limit else text[:limit - 1] + "…"
