"""The export queue as users see it: status (who writes, depth, oldest, failures) and re-queueing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Invalid, NotFound
from ..schema import format_time
from ..store.archive_store import ArchiveStore
from ..store.db import Database
from . import gitrepo
from .daemon import describe_holder


@dataclass
class QueueStatus:
    holder: dict[str, Any] | None
    counts: dict[str, int]
    oldest_pending: dict[str, Any] | None
    failed: list[dict[str, Any]] = field(default_factory=list)
    archivers: list[dict[str, Any]] = field(default_factory=list)
    backlog: dict[str, Any] = field(default_factory=dict)  # what is not archived yet (mm_archive_metrics)
    repo: Path | None = None  # the archive repository looked at (--repo or [archive] repo)
    repo_problems: list[str] = field(default_factory=list)

    @property
    def standbys(self) -> list[dict[str, Any]]:
        """Archivers alive and waiting for the lease."""
        return [a for a in self.archivers if a["alive"] and not a["leader"]]

    def to_json(self) -> dict[str, Any]:
        holder = None
        if self.holder:
            holder = {"worker": self.holder["worker"], "role": self.holder["role_name"],
                      "application_name": self.holder.get("client"), "since": _time(self.holder.get("since")),
                      "lease_until": _time(self.holder.get("lease_until"))}
        oldest = None
        if self.oldest_pending:
            o = self.oldest_pending
            oldest = {"job_id": o["job_id"], "snapshot_id": o["snapshot_id"], "session_id": o["session_id"],
                      "created_at": _time(o["created_at"]), "age_seconds": round(float(o["age_seconds"]), 1),
                      "attempts": o["attempts"], "run_after": _time(o["run_after"]), "last_error": o["last_error"]}
        counts = {s: self.counts.get(s, 0) for s in ("pending", "running", "done", "failed")}
        standbys = [{"worker": a["worker"], "role": a["role_name"], "last_seen": _time(a["last_seen"])}
                    for a in self.standbys]
        backlog = {"sessions": int(self.backlog.get("unarchived_sessions") or 0),
                   "messages": int(self.backlog.get("unarchived_messages") or 0),
                   "lag_seconds": round(float(self.backlog.get("unarchived_oldest_seconds") or 0), 1)}
        return {"active_archiver": holder, "standbys": standbys, "jobs": counts, "not_archived": backlog,
                "queue_depth": counts["pending"] + counts["running"], "oldest_pending": oldest,
                "failed": [{"job_id": f["job_id"], "snapshot_id": f["snapshot_id"], "session_id": f["session_id"],
                            "attempts": f["attempts"], "last_error": f["last_error"],
                            "finished_at": _time(f["finished_at"])} for f in self.failed],
                "repository": None if self.repo is None else {"path": str(self.repo), "ok": not self.repo_problems,
                                                              "problems": self.repo_problems}}

    def lines(self) -> list[str]:
        doc = self.to_json()
        jobs = doc["jobs"]
        out = [f"active archiver: {describe_holder(self.holder)}"]
        out += [f"standby: {s['worker']} (role {s['role']}), last asked {s['last_seen']}" for s in doc["standbys"]]
        out.append(f"queue: {doc['queue_depth']} waiting ({jobs['pending']} pending, {jobs['running']} running), "
                   f"{jobs['done']} done, {jobs['failed']} failed")
        if (backlog := doc["not_archived"])["sessions"]:
            out.append(f"not archived yet: {backlog['sessions']} session(s) with {backlog['messages']} message(s) "
                       f"or other changes; the oldest last changed {backlog['lag_seconds']:.0f}s ago (the "
                       "automatic snapshot policy takes them once idle)")
        else:
            out.append("not archived yet: nothing")
        if oldest := doc["oldest_pending"]:
            error = f", last error: {oldest['last_error']}" if oldest["last_error"] else ""
            out.append(f"oldest waiting: job {oldest['job_id']} (snapshot {oldest['snapshot_id']}, "
                       f"{oldest['session_id']}) for {oldest['age_seconds']:.0f}s, {oldest['attempts']} "
                       f"failed attempt(s){error}")
        for f in doc["failed"]:
            out.append(f"failed: job {f['job_id']} (snapshot {f['snapshot_id']}) after {f['attempts']} "
                       f"attempt(s): {f['last_error']}")
        if doc["failed"]:
            out.append("re-queue with: mcp-memory archive retry --failed")
        if self.repo is not None:
            out.append(f"repository {self.repo}: " + ("refused content, nothing written through it"
                                                      if self.repo_problems else "ok"))
            out += [f"refused: {problem}" for problem in self.repo_problems]
        return out


def status(db: Database, *, repo: Path | None = None) -> QueueStatus:
    """The queue; with `repo`, also what in that repository the archiver refuses (gitrepo.inspect)."""
    with db.transaction() as conn:
        store = ArchiveStore(conn)
        archivers = store.archivers()
        leader = next((a for a in archivers if a["leader"] and a["alive"]), None)
        state = QueueStatus(holder=leader, counts=store.status_counts(), oldest_pending=store.oldest_pending(),
                            failed=store.failed_jobs(), archivers=archivers, backlog=store.metrics())
    if repo is not None:
        state.repo, state.repo_problems = repo, gitrepo.inspect(repo)
    return state


def retry(db: Database, *, job_id: int | None) -> list[int]:
    """Re-queue one job (failed, or pending in backoff: now) or every failed job; wakes the archiver."""
    with db.transaction() as conn:
        store = ArchiveStore(conn)
        if job_id is not None:
            job = store.get_job(job_id)
            if job is None:
                raise NotFound(f"export job {job_id} does not exist")
            if job["status"] not in ("failed", "pending"):
                raise Invalid(f"export job {job_id} is {job['status']}; only failed or pending jobs can be retried")
        requeued = store.requeue(job_id)
        if requeued:
            store.notify("")  # the export channel carries nothing (migration 0014)
    return requeued


def _time(value: Any) -> str | None:
    return format_time(value) if value is not None else None
