"""After a point-in-time restore the archive carries on by itself. The database's state after such a
restore is made here directly (snapshots made after the "target" deleted with their jobs, the
snapshot id sequence put back), the archive keeps their tags; then a host snapshots before anyone
moves the sequence. `mcp-memory archive --once` renumbers that snapshot past the archive's highest
tag and exports it, later snapshots export too, and nothing is left failed or pending."""

from __future__ import annotations

import json

import psycopg
from archive_support import cli, db_rows, git, messages  # noqa: F401  (fixtures)

from mcp_memory.core.service import Service


def _rewind(dsn: str, keep_up_to: int) -> None:
    """What a restore to the moment after snapshot `keep_up_to` leaves: later snapshots gone, ids back."""
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM export_jobs WHERE snapshot_id > %s", (keep_up_to,))
        conn.execute("DELETE FROM snapshots WHERE snapshot_id > %s", (keep_up_to,))
        conn.execute("SELECT setval(pg_get_serial_sequence('snapshots', 'snapshot_id'), %s)", (keep_up_to,))


def test_a_snapshot_made_before_the_sequence_step_is_renumbered_and_exported(service: Service, cli, settings,  # noqa: F811
                                                                             tmp_path, capsys) -> None:
    a, b = service.create_session("P"), service.create_session("P")
    service.append_messages(a.session_id, messages(2, "a"))
    service.append_messages(b.session_id, messages(2, "b"))
    first = service.create_snapshot(a.session_id, "before the target").snapshot_id
    later = [service.create_snapshot(b.session_id, f"after the target {n}").snapshot_id for n in range(3)]
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    top = max(later)
    _rewind(settings.dsn, first)

    service.append_messages(a.session_id, messages(1, "after the restore"))
    stuck = service.create_snapshot(a.session_id, "made before the sequence step").snapshot_id
    assert stuck <= top  # an id the archive holds for another snapshot
    capsys.readouterr()
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    out = capsys.readouterr().out
    assert "1 renumbered past the archive's highest tag" in out
    jobs = db_rows(settings.dsn, "SELECT j.snapshot_id, j.status, n.meta FROM export_jobs j "
                                 "JOIN snapshots n USING (snapshot_id) WHERE j.snapshot_id > %s", first)
    assert len(jobs) == 1 and jobs[0][0] > top and jobs[0][1] == "done"
    assert jobs[0][2]["renumbered_from"] == stuck
    assert f"snapshot-{jobs[0][0]}" in git(repo, "tag", "-l").split()
    # the next snapshot gets a fresh id and is exported; nothing waits or failed
    service.append_messages(a.session_id, messages(1, "next"))
    nxt = service.create_snapshot(a.session_id, "next").snapshot_id
    assert nxt > jobs[0][0]
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    assert f"snapshot-{nxt}" in git(repo, "tag", "-l").split()
    capsys.readouterr()
    assert cli("archive", "status", "--json") == 0
    status = json.loads(capsys.readouterr().out)
    assert status["jobs"]["failed"] == 0 and status["jobs"]["pending"] == 0


def test_taking_the_lease_moves_the_ids_past_the_archive(service: Service, cli, settings, tmp_path) -> None:  # noqa: F811
    s = service.create_session("P")
    service.append_messages(s.session_id, messages(2))
    ids = [service.create_snapshot(s.session_id, f"s{n}").snapshot_id for n in range(3)]
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    _rewind(settings.dsn, ids[0])
    assert cli("archive", "--once", "--repo", str(repo)) == 0  # nothing to export: only takes the lease
    service.append_messages(s.session_id, messages(1, "after"))
    assert service.create_snapshot(s.session_id, "after the restore").snapshot_id == ids[-1] + 1
