"""The archiver: the only place that joins the export queue and the git repository.

One archiver writes at a time: it holds the lease of migration 0014 (store.archive_store.LeaderLock);
others wait as standbys and take over within `standby_interval` of its death. The active one claims
due jobs (`FOR UPDATE SKIP LOCKED`, with a lease it keeps renewing), exports each snapshot (commit +
tag), pushes once per batch and marks the batch done. A failed export or push puts the job back with
exponential backoff (RetryStrategy) until it is `failed`; later jobs keep being committed meanwhile.
It wakes on NOTIFY 'mcp_memory_export' and polls as the fallback.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from ..errors import Invalid, McpMemoryError, Unavailable
from ..metrics import Sample
from ..store.archive_store import ArchiveStore, ClaimedJob, LeaderLock, Listener, PooledConnection
from ..store.db import Database, translate_errors
from . import export, gitrepo, gittags, layout
from .options import ArchiverOptions

log = logging.getLogger(__name__)
PROGRESS_SECONDS = 10.0


@dataclass
class RunSummary:
    exported: int = 0
    auto_snapshots: int = 0
    lines: int = 0
    done: int = 0
    retrying: int = 0
    failed: int = 0
    renumbered: int = 0  # snapshots whose id the archive held for another (after a point-in-time restore)
    errors: list[str] = field(default_factory=list)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Archiver:
    def __init__(self, db: Database, options: ArchiverOptions, *, crash_at: str | None = None) -> None:
        if crash_at is not None and crash_at not in export.CRASH_POINTS:
            raise Invalid(f"--crash-at must be one of {', '.join(export.CRASH_POINTS)}")
        if db.settings.pgbouncer and not db.settings.direct_dsn:
            raise Invalid("the archiver holds its lease on one connection and LISTENs for snapshots, which a "
                          "pooler in transaction mode breaks (the database is behind PgBouncer: [database] "
                          "pgbouncer = true): set [database] direct_dsn to a DSN that reaches PostgreSQL directly")
        self.db = db
        self.options = options
        self.crash_at = crash_at
        self.worker = worker_name()
        self.lock = LeaderLock(db, self.worker)
        self.listener = Listener(db)
        self.stopping = threading.Event()
        self.summary = RunSummary()
        self._last_heartbeat = 0.0
        self._due_before: datetime | None = None
        self._remote_head_checked = False
        self._next_auto = 0.0

    # lifecycle --------------------------------------------------------------------------------
    def run(self, *, once: bool) -> RunSummary:
        """`once`: take the lock (waiting up to lock_wait), drain the due jobs, return. Otherwise run
        until stop() (SIGTERM/SIGINT): standby while another archiver is active, then the loop."""
        deadline = time.monotonic() + self.options.lock_wait
        self._check_direct()
        if once:
            with self.db.transaction() as conn:
                self._due_before = ArchiveStore(conn).now()
        try:
            while not self.stopping.is_set():
                try:
                    if not self.lock.held() and not self._become_leader():
                        if once and time.monotonic() > deadline:
                            raise Unavailable(f"another archiver is active ({self.holder()}); nothing done")
                        self._sleep(self.options.standby_interval)
                        continue
                    if not once:
                        # LISTEN before looking at the queue: a snapshot made in between is then
                        # either in this cycle or announced by a NOTIFY, never missed until a poll
                        self.listener.listen()
                    self._auto_snapshot()
                    handled = self._cycle()
                    if once and handled == 0:
                        break
                    if handled == 0:
                        self._wait()  # it reads the queue too: a failover may strike here as well
                except Unavailable as exc:  # database or repository away: back to standby, try again
                    if once:
                        raise
                    log.warning("archiver: %s; retrying in %.0fs", exc, self.options.poll_interval)
                    self.lock.release()
                    self._sleep(self.options.poll_interval)
                    continue
        finally:
            self._shutdown()
        return self.summary

    def _check_direct(self) -> None:
        """Before anything else: the lease's connection must reach PostgreSQL itself, not a pooler
        (PooledConnection says what to configure). A database that is away now is the loop's
        business: it retries."""
        try:
            self.lock.connect()
        except PooledConnection:
            self.lock.release()
            raise
        except (McpMemoryError, psycopg.Error) as exc:
            log.warning("archiver: %s", exc)
            self.lock.release()

    def metric_samples(self) -> list[Sample]:
        """This archiver's own numbers for /metrics (archive --daemon --metrics-port)."""
        s = self.summary
        counters = (("exported", "snapshots exported", s.exported), ("lines", "archive lines written", s.lines),
                    ("failed", "export jobs that failed for good", s.failed),
                    ("retrying", "failed export attempts sent back to retry", s.retrying),
                    ("auto_snapshots", "snapshots made by the automatic snapshot policy", s.auto_snapshots))
        return [Sample("mcp_memory_archiver_leader", "gauge", "1 while this archiver holds the lease (the active "
                       "writer), 0 as a standby", float(self.lock.owned)),
                *(Sample(f"mcp_memory_archiver_{name}_total", "counter", f"{help} by this process", float(value))
                  for name, help, value in counters)]

    def stop(self, *_: Any) -> None:
        self.stopping.set()

    def holder(self) -> str:
        with self.db.transaction() as conn:
            row = ArchiveStore(conn).lock_holder()
        return describe_holder(row)

    def _become_leader(self) -> bool:
        if not self.lock.try_acquire():
            return False
        log.info("archiver %s is now the active writer of %s", self.worker, self.options.repo)
        gitrepo.init(self.options.repo, self.options.remote)
        gitrepo.heal(self.options.repo)
        try:
            outcome = gitrepo.sync_with_remote(self.options.repo, self.options.remote,
                                               timeout=self.options.push_timeout)
        except gitrepo.UnsafeArchive as exc:
            # keep committing locally; pushes are rejected until the remote is repaired, and each job
            # names the refusal (archive status)
            log.error("%s", exc)
            outcome = "refused"
        with self._queue() as queue:
            stale = queue.release_running()
            # after a point-in-time restore the database hands out ids the archive has used already
            if (floor := queue.snapshot_floor(gittags.highest_snapshot_id(self.options.repo))) is not None:
                log.warning("snapshot ids moved past the archive's highest tag: the next one is %d (the "
                            "database went back to an earlier point)", floor + 1)
        if stale or outcome == "reset":
            log.info("took over: %d stale job(s) back in the queue; repository %s", stale, outcome)
        return True

    def _shutdown(self) -> None:
        try:
            if self.lock.held():
                with self._queue() as queue:
                    queue.release_running()
        except McpMemoryError as exc:
            log.warning("archiver shutdown: %s", exc)
        self.lock.release()
        self.listener.close()

    # one round: claim, export, push, finish ----------------------------------------------------
    def _cycle(self) -> int:
        with self._queue() as queue:
            jobs = queue.claim(worker=self.worker, lease=self.options.lease, limit=self.options.batch,
                               due_before=self._due_before)
        self._last_heartbeat = time.monotonic()
        exported: list[tuple[ClaimedJob, str]] = []
        failed_sessions: set[str] = set()
        held_back: list[int] = []
        for job in jobs:
            if self.stopping.is_set() or not self.lock.held():
                break
            if job.session_id in failed_sessions:
                # never export snapshot N+1 before N: N's tag must hold N's lines, not N+1's
                held_back.append(job.job_id)
                continue
            commit = self._export(job)
            if commit is not None:
                exported.append((job, commit))
            else:
                failed_sessions.add(job.session_id)
            self._heartbeat()
        if held_back:
            with self._queue() as queue:
                queue.unclaim(held_back)
        if exported:
            self._publish(exported)
        return len(jobs)

    def _auto_snapshot(self) -> None:
        """The automatic snapshot policy, at most every `auto.interval` seconds (--once: at the start)."""
        policy = self.options.auto
        if not policy.active or time.monotonic() < self._next_auto:
            return
        once = self._due_before is not None
        # --once looks once, before its first claim, and lets the jobs it queued into this run
        self._next_auto = float("inf") if once else time.monotonic() + policy.interval
        with self._queue() as queue:
            made = queue.auto_snapshot(idle_seconds=policy.idle_seconds or None,
                                       every_messages=policy.every_messages or None, limit=policy.batch)
            if once and made:
                self._due_before = queue.now()
        self.summary.auto_snapshots += len(made)
        if made:
            log.info("automatic snapshot of %d session(s): %s", len(made),
                     ", ".join(f"{row['session_id']} up to seq {row['up_to_seq']}" for row in made[:10]))

    def _export(self, job: ClaimedJob) -> str | None:
        """The archive commit of the job's snapshot, or None when the export failed."""
        try:
            result = export.export_snapshot(self.db, self.options.repo, job.snapshot_id, checkpoint=self._checkpoint,
                                            progress=self._progress(job))
        except export.IdTaken as exc:
            self._renumber(job, exc)
            return None
        except (McpMemoryError, OSError) as exc:
            if isinstance(exc, gitrepo.GitError):
                self._heal()  # a git command killed by its timeout may have left a lock behind
            self._failed(job, exc)
            return None
        self.summary.exported += 1
        self.summary.lines += result.lines
        log.info("snapshot %d: %s +%d line(s)%s", job.snapshot_id, result.session_id or "(already exported)",
                 result.lines, "" if result.already else f" → {result.commit[:10]}")
        return result.commit

    def _renumber(self, job: ClaimedJob, exc: export.IdTaken) -> None:
        """The snapshot's id is another snapshot's tag in the archive (a point-in-time restore took the
        ids back): it gets the next id past the archive's highest tag and its job is pending again, so
        the next cycle exports it; no attempt is counted and nothing waits for an admin."""
        top = gittags.highest_snapshot_id(self.options.repo)
        try:
            with self._queue() as queue:
                new_id = queue.renumber_snapshot(job.snapshot_id, top)
                if self._due_before is not None:  # --once: the job, pending again now, is in this run
                    self._due_before = queue.now()
        except McpMemoryError as failure:
            self._failed(job, failure)
            return
        log.warning("snapshot %d renumbered to %d: %s", job.snapshot_id, new_id, exc)
        self.summary.renumbered += 1

    def _progress(self, job: ClaimedJob) -> export.Progress:
        """A large session's export: its progress in the log (every PROGRESS_SECONDS) and the job's
        lease kept alive between pages."""
        shown = time.monotonic()

        def report(seq: int, up_to_seq: int) -> None:
            nonlocal shown
            self._heartbeat()
            if time.monotonic() - shown >= PROGRESS_SECONDS:
                shown = time.monotonic()
                log.info("snapshot %d: %s exported up to seq %d of %d", job.snapshot_id, job.session_id, seq,
                         up_to_seq)

        return report

    def _heal(self) -> None:
        try:
            gitrepo.heal(self.options.repo)
        except McpMemoryError as exc:
            log.warning("archive repository: %s", exc)

    def _publish(self, done: list[tuple[ClaimedJob, str]]) -> None:
        """Push (when a remote is set) and mark the batch done; a push failure sends the batch back to
        the queue with backoff — the commits stay, later batches keep committing and pushing them."""
        if self.options.remote:
            try:
                # a long push keeps the jobs' leases (push_timeout: seconds without progress)
                gitrepo.push(self.options.repo, timeout=self.options.push_timeout, tick=self._heartbeat)
            except gitrepo.GitError as exc:
                failure: gitrepo.GitError = exc
                if exc.rejected:
                    try:
                        gitrepo.sync_with_remote(self.options.repo, self.options.remote,
                                                 timeout=self.options.push_timeout)
                    except gitrepo.UnsafeArchive as refused:
                        failure = refused
                for job, _ in done:
                    self._failed(job, failure)
                return
            self._point_remote_head()
        with self._queue() as queue:
            self.summary.done += queue.mark_done([job.job_id for job, _ in done], [commit for _, commit in done])

    def _point_remote_head(self) -> None:
        """After the first push of this run: a remote made by plain `git init --bare` names master in
        its HEAD, and a clone of it would check nothing out (README, disaster recovery)."""
        if self._remote_head_checked or not self.options.remote:
            return
        self._remote_head_checked = True
        try:
            if gitrepo.point_remote_head(self.options.remote):
                log.info("the archive remote's HEAD now names %s, so that a clone checks it out", layout.BRANCH)
        except gitrepo.GitError as exc:
            log.warning("cannot point the archive remote's HEAD at %s: %s", layout.BRANCH, exc)

    def _failed(self, job: ClaimedJob, exc: BaseException) -> None:
        attempts = job.attempts + 1
        # a row that does not verify stays wrong however often it is retried
        give_up = isinstance(exc, export.Tampered) or self.options.retry.exhausted(attempts)
        delay = 0.0 if give_up else self.options.retry.delay(attempts)
        error = str(exc) or type(exc).__name__
        with self._queue() as queue:
            queue.mark_attempt_failed(job.job_id, error=error, give_up=give_up, delay=delay)
        if give_up:
            self.summary.failed += 1
            log.error("job %d (snapshot %d) failed after %d attempts: %s", job.job_id, job.snapshot_id, attempts, error)
        else:
            self.summary.retrying += 1
            log.warning("job %d (snapshot %d) attempt %d failed, retry in %.1fs: %s",
                        job.job_id, job.snapshot_id, attempts, delay, error)
        self.summary.errors.append(f"job {job.job_id}: {error}")

    def _heartbeat(self) -> None:
        if time.monotonic() - self._last_heartbeat < self.options.lease / 3:
            return
        with self._queue() as queue:
            queue.heartbeat(worker=self.worker, lease=self.options.lease)
        self._last_heartbeat = time.monotonic()

    @contextmanager
    def _queue(self) -> Iterator[ArchiveStore]:
        """The queue, worked only on the connection holding the single-writer lock."""
        with translate_errors():
            yield self.lock.store()

    # waiting ----------------------------------------------------------------------------------
    def _wait(self) -> None:
        """Until a NOTIFY, the poll interval, or the next job in backoff is due; in ≤1s slices so a
        signal stops the daemon promptly."""
        with self.db.transaction() as conn:
            due = ArchiveStore(conn).next_due()
        timeout = self.options.poll_interval if due is None else min(self.options.poll_interval, max(due, 0.05))
        if self.options.auto.active:
            timeout = min(timeout, max(self._next_auto - time.monotonic(), 0.05))
        end = time.monotonic() + timeout
        while not self.stopping.is_set() and (left := end - time.monotonic()) > 0:
            if self.listener.wait(min(left, 1.0)):
                return

    def _sleep(self, seconds: float) -> None:
        self.stopping.wait(seconds)

    def _checkpoint(self, point: str) -> None:
        """Crash tests: SIGKILL ourselves at the named point (only with the hidden --crash-at flag)."""
        if point == self.crash_at:
            log.warning("crash point %s reached: killing the archiver (--crash-at)", point)
            logging.shutdown()
            os.kill(os.getpid(), signal.SIGKILL)


def describe_holder(row: dict[str, Any] | None) -> str:
    """The leader as `archive status` names it: its worker (host:pid of the archiver process), its
    database role and since when it holds the lease."""
    if not row:
        return "nobody"
    since = f" since {row['since']:%Y-%m-%d %H:%M:%S%z}" if row.get("since") else ""
    return f"{row['worker']} (role {row['role_name']}){since}"


@contextmanager
def stop_on_signals(archiver: Archiver) -> Iterator[None]:
    """SIGTERM and SIGINT finish the current job, release the lock and return (clean shutdown)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, archiver.stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
