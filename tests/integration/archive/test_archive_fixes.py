"""Archive edge cases: a large session exports in pages within a short call deadline; a transient
failure of snapshot N never lets N+1's lines under N's tag (and verify --repair re-tags what an older
version got wrong); a snapshot retried after a later one was exported gets its exact tree; verify
on a standby's stale copy compares the remote's archive."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from archive_support import bare_remote, db_rows, git, messages, second_db  # noqa: F401

from mcp_memory.archive import export, gitrepo, gittags, layout, restore
from mcp_memory.archive.daemon import Archiver
from mcp_memory.archive.options import ArchiverOptions, AutoSnapshot
from mcp_memory.archive.retry import RetryStrategy
from mcp_memory.archive.verify import verify
from mcp_memory.cli import main
from mcp_memory.config import load_settings
from mcp_memory.core.service import Service
from mcp_memory.errors import Conflict, Invalid, Unavailable
from mcp_memory.store.archive_store import ArchiveStore
from mcp_memory.store.db import Database

NO_AUTO = AutoSnapshot(enabled=False)
LARGE = 60_000


def options(repo: Path, **kwargs: object) -> ArchiverOptions:
    return ArchiverOptions(repo=repo, auto=NO_AUTO, retry=RetryStrategy(base=0.2, jitter=0), **kwargs)  # type: ignore[arg-type]


def bulk_messages(dsn: str, session_id: str, count: int) -> None:
    """Many rows at once, through the database's own payload hash (as the write functions store them)."""
    with psycopg.connect(dsn) as conn:
        conn.execute("""
            INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at,
                                  part_month)
            SELECT s.session_id, g, s.project_id, 'bulk-' || g, 'user', p.payload, mm_payload_hash(p.payload), now(),
                   s.part_month
            FROM sessions s, generate_series(1, %(n)s) AS g,
                 LATERAL (SELECT jsonb_build_object('role', 'user', 'content',
                                                    'message ' || g || ' ' || repeat('x', 200)) AS payload) p
            WHERE s.session_id = %(sid)s""", {"sid": session_id, "n": count})
        conn.execute("UPDATE sessions SET last_seq = %s WHERE session_id = %s", (count, session_id))


def test_a_large_session_exports_in_pages_within_a_short_call_timeout(service: Service, settings,
                                                                      tmp_path: Path) -> None:
    sid = service.create_session("proj").session_id
    bulk_messages(settings.dsn, sid, LARGE)
    service.create_snapshot(sid, "large")
    db = Database(replace(settings, call_timeout=1.0, pool_min=0, pool_max=2), application_name="archiver@test")
    started = time.monotonic()
    try:
        summary = Archiver(db, options(tmp_path / "archive")).run(once=True)
    finally:
        db.close()
    elapsed = time.monotonic() - started
    assert (summary.exported, summary.lines, summary.failed) == (1, LARGE, 0), summary.errors
    assert elapsed > 1.0  # the whole export took longer than one call may: it ran in pages
    assert verify(service.db, tmp_path / "archive").ok
    print(f"{LARGE} messages exported in {elapsed:.1f}s with call_timeout 1s")


class FailingOnce(Archiver):
    """An archiver whose first export of one snapshot meets a database outage (the error the store
    raises when the connection is lost), as a flaky network gives it."""

    def __init__(self, db: Database, opts: ArchiverOptions, *, fail_snapshot: int) -> None:
        super().__init__(db, opts)
        self.fail_snapshot = fail_snapshot

    def _export(self, job):  # type: ignore[no-untyped-def]
        if job.snapshot_id == self.fail_snapshot:
            self.fail_snapshot = -1
            self._failed(job, Unavailable("database unreachable, retry later (connection lost)"))
            return None
        return super()._export(job)


def test_a_transient_failure_of_snapshot_n_keeps_every_tag_exact(service: Service, settings,
                                                                 tmp_path: Path) -> None:
    sid = service.create_session("proj").session_id
    service.append_messages(sid, messages(3))
    n = service.create_snapshot(sid, "N").snapshot_id
    service.append_messages(sid, messages(2, "later"))
    n1 = service.create_snapshot(sid, "N+1").snapshot_id
    other = service.create_session("proj").session_id
    service.append_messages(other, messages(1))
    other_snap = service.create_snapshot(other, "another session").snapshot_id
    repo = tmp_path / "archive"
    first = FailingOnce(service.db, options(repo), fail_snapshot=n).run(once=True)
    assert (first.exported, first.retrying) == (1, 1)  # the other session's snapshot; N+1 waits for N
    assert not gittags.tag_exists(repo, layout.tag_name(n1)) and gittags.tag_exists(repo, layout.tag_name(other_snap))
    states = dict(db_rows(settings.dsn, "SELECT snapshot_id, attempts FROM export_jobs"))
    assert states[n1] == 0  # held back, not charged an attempt
    time.sleep(0.5)  # N's backoff
    second = Archiver(service.db, options(repo)).run(once=True)
    assert (second.exported, second.failed) == (2, 0)
    report = verify(service.db, repo)
    assert report.ok, report.differences
    for snap, seq in ((n, 3), (n1, 5)):
        tree = git(repo, "show", f"{layout.tag_name(snap)}:{layout.session_path(sid)}")
        assert len(tree.splitlines()) == seq


def test_a_snapshot_retried_after_a_later_one_gets_its_exact_tree_and_repair_fixes_old_tags(
        service: Service, settings, tmp_path: Path, second_db: str) -> None:  # noqa: F811
    sid = service.create_session("proj").session_id
    service.append_messages(sid, messages(3))
    n = service.create_snapshot(sid, "N").snapshot_id
    service.append_messages(sid, messages(2, "later"))
    n1 = service.create_snapshot(sid, "N+1").snapshot_id
    remote = bare_remote(tmp_path)
    repo = tmp_path / "archive"
    gitrepo.init(repo, str(remote))
    export.export_snapshot(service.db, repo, n1)  # N+1 first: N failed for good, then was retried
    late = export.export_snapshot(service.db, repo, n)
    assert late.commit != gitrepo.head(repo)  # beside main, main untouched
    assert len(git(repo, "show", f"{layout.tag_name(n)}:{layout.session_path(sid)}").splitlines()) == 3
    assert verify(service.db, repo).ok

    # what an earlier version did instead: an empty commit for N on main, tagged, holding N+1's lines
    gitrepo.git(repo, "tag", "-d", layout.tag_name(n))
    with service.db.transaction() as conn:
        info = export.snapshot_info(ArchiveStore(conn).export_snapshot(n))
    wrong = gitrepo.commit(repo, [], layout.commit_message(info))
    gittags.tag(repo, layout.tag_name(n), wrong, layout.subject(n, sid, 3) + "\n")
    gitrepo.push(repo, timeout=60)  # the remote has the wrong tag as well
    broken = verify(service.db, repo, fetch=False)
    assert any(f"tag {layout.tag_name(n)}: its tree holds lines up to seq 5, beyond the snapshot's seq 3" in d
               for d in broken.differences), broken.differences
    repaired = verify(service.db, repo, repair=True, fetch=False)
    assert repaired.ok and len(repaired.repaired) == 1, (repaired.differences, repaired.repaired)
    assert len(git(repo, "show", f"{layout.tag_name(n)}:{layout.session_path(sid)}").splitlines()) == 3
    assert verify(service.db, repo).ok  # verify's fetch never puts the remote's old tag back on the leader
    gitrepo.push(repo, timeout=60)  # the repaired tag reaches the remote too
    assert git(remote, "rev-parse", f"{layout.tag_name(n)}^{{commit}}").strip() == \
        git(repo, "rev-parse", f"{layout.tag_name(n)}^{{commit}}").strip()
    result = restore.restore(Database(replace(settings, dsn=second_db)), remote)
    assert result.ok and (result.messages, result.snapshots) == (5, 2), result.to_json()


def test_verify_on_a_standby_copy_compares_the_remote_archive(service: Service, settings, tmp_path: Path) -> None:
    remote = bare_remote(tmp_path)
    leader, standby = tmp_path / "leader", tmp_path / "standby"
    sid = service.create_session("proj").session_id
    service.append_messages(sid, messages(2))
    service.create_snapshot(sid, "one")
    assert Archiver(service.db, options(leader, remote=str(remote))).run(once=True).done == 1
    subprocess.run(["git", "clone", "-q", str(remote), str(standby)], check=True)
    service.append_messages(sid, messages(3, "more"))
    service.create_snapshot(sid, "two")
    assert Archiver(service.db, options(leader, remote=str(remote))).run(once=True).done == 1
    stale = verify(service.db, standby, fetch=False)
    assert not stale.ok  # the copy as it is lags the jobs marked done
    report = verify(service.db, standby)
    assert report.ok, report.differences
    assert report.sessions[0]["archive"]["messages"] == 5


def test_behind_pgbouncer_the_archiver_needs_a_direct_dsn_and_keeps_its_lease_there(service: Service, settings,
                                                                                     tmp_path: Path) -> None:
    pooled = replace(settings, pgbouncer=True)
    try:
        Archiver(Database(pooled), options(tmp_path / "archive"))
    except Invalid as exc:
        assert "direct_dsn" in str(exc) and "PgBouncer" in str(exc)
    else:
        raise AssertionError("an archiver behind PgBouncer without direct_dsn started")
    # the pooled DSN and the direct one told apart by a setting each carries
    direct = replace(pooled, dsn=settings.dsn + " options='-c mm.via=pooler'",
                     direct_dsn=settings.dsn + " options='-c mm.via=direct'")
    db = Database(direct, application_name="archiver@test")
    archiver = Archiver(db, options(tmp_path / "archive"))
    try:
        assert archiver.lock.try_acquire()
        assert archiver.lock.conn is not None
        assert archiver.lock.conn.execute("SHOW mm.via").fetchone() == ("direct",)
        with db.transaction() as conn:
            assert conn.execute("SHOW mm.via").fetchone() == ("pooler",)
        sid = service.create_session("proj").session_id
        service.append_messages(sid, messages(2))
        service.create_snapshot(sid, "behind a pooler")
        archiver.lock.release()
        assert archiver.run(once=True).done == 1
    finally:
        archiver.lock.release()
        db.close()


def test_doctor_says_when_listen_cannot_hear_appends(settings, profile, tmp_path: Path, monkeypatch, capsys) -> None:
    for key, value in profile.items():
        monkeypatch.setenv(key, value)
    config = tmp_path / "pooled.toml"
    monkeypatch.setenv("MCP_MEMORY_CONFIG", str(config))
    for extra, warned in (("", True), (f"direct_dsn = {json.dumps(settings.dsn)}\n", False)):
        config.write_text("[database]\npgbouncer = true\n" + extra)
        capsys.readouterr()
        main(["--dsn", settings.dsn, "doctor", "--json"])
        (listen,) = [c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"] == "listen"]
        assert listen["warning"] is warned and ("direct_dsn" in listen["detail"]), listen


@pytest.mark.parametrize(("key", "value"), [("auto_snapshot", "yes"), ("auto_snapshot_idle_seconds", True),
                                            ("auto_snapshot_idle_seconds", -1), ("auto_snapshot_every_messages", "10"),
                                            ("auto_snapshot_interval", 0), ("auto_snapshot_batch", 10001)])
def test_a_bad_automatic_snapshot_setting_is_named(key: str, value: object, tmp_path: Path) -> None:
    settings = load_settings(environ={"MCP_MEMORY_HOME": str(tmp_path)})
    with pytest.raises(Invalid, match=key):
        ArchiverOptions.resolve(replace(settings, archive={"repo": str(tmp_path / "a"), key: value}))


def test_a_snapshot_id_the_archive_holds_for_another_snapshot_is_not_skipped(service: Service,
                                                                            tmp_path: Path) -> None:
    """After a restore to an earlier point in time the snapshot ids count from an earlier value: the
    archive's `snapshot-<id>` may be another snapshot's. The export says so instead of taking the tag
    as this snapshot exported before; a retry of the same snapshot still finds its own tag."""
    sid = service.create_session("proj").session_id
    service.append_messages(sid, messages(2))
    snap = service.create_snapshot(sid, "mine").snapshot_id
    remote = bare_remote(tmp_path)
    repo = tmp_path / "archive"
    gitrepo.init(repo, str(remote))
    first = export.export_snapshot(service.db, repo, snap)
    assert export.export_snapshot(service.db, repo, snap).already  # a retry
    gitrepo.git(repo, "tag", "-d", layout.tag_name(snap))  # the archive's tag is another session's
    gittags.tag(repo, layout.tag_name(snap), first.commit, layout.subject(snap, "ses_from_before_the_restore", 9) + "\n")
    with pytest.raises(Conflict, match=r"snapshot ids went back .* the next free id past the archive.s highest tag"):
        export.export_snapshot(service.db, repo, snap)
