"""The archive as the disaster-recovery copy: with the automatic snapshot policy, a database whose
sessions nobody snapshotted (or snapshotted long ago) comes back from the archive alone — every
session, message, decision version (with status, supersedes links, visibility, author) and context
revision — and verify checks all of it."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from archive_support import cli, db_rows, messages, second_db  # noqa: F401  (fixtures)
from security_support import connect_as, make_token, owner_db, password_server, token_service  # noqa: F401

from mcp_memory.archive import layout
from mcp_memory.archive.daemon import Archiver
from mcp_memory.archive.options import ArchiverOptions, AutoSnapshot
from mcp_memory.archive.verify import verify
from mcp_memory.cli import main
from mcp_memory.core.service import Service
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

SESSIONS = ("SELECT session_id, project_id, agent_source, title, meta, last_seq, parent_session_id, fork_seq, "
            "created_by, created_at FROM sessions ORDER BY session_id")
MESSAGES = ("SELECT session_id, seq, append_id, role, payload, payload_hash, created_at FROM messages "
            "ORDER BY session_id, seq")
DECISIONS = ("SELECT session_id, decision_id, project_id, message_seq, decision_type, summary, status, rationale, "
             "alternatives, supersedes, superseded_by, metadata, visibility, version, tsv::text, created_by, "
             "created_at, updated_at FROM decisions ORDER BY decision_id")
VERSIONS = "SELECT session_id, decision_id, version, project_id, row FROM decision_versions ORDER BY 2, 3"
CONTEXT = ("SELECT session_id, key, revision, project_id, value, created_by, created_at FROM session_context "
           "ORDER BY session_id, key, revision")


def busy_database(service: Service) -> dict[str, str]:
    """Sessions nobody snapshotted, one snapshotted before more work, an empty one, a fork; decisions
    updated and superseded (every version differs), a private one; context keys set several times."""
    a = service.create_session("proj", {"title": "snapshotted early", "agent_source": "claude-code"})
    service.append_messages(a.session_id, messages(4, "a"))
    service.create_snapshot(a.session_id, "early")
    service.append_messages(a.session_id, messages(3, "a-later"))
    service.update_session_meta(a.session_id, {"title": "renamed after the snapshot", "meta": {"ticket": 7}})
    b = service.create_session("proj", {"title": "never snapshotted"})
    service.append_messages(b.session_id, messages(6, "b"))
    empty = service.create_session("proj", {"title": "empty"})
    fork = service.load_snapshot(service.create_snapshot(b.session_id, "for a fork").snapshot_id)
    service.append_messages(fork.session_id, messages(2, "fork"))
    first = service.record_decision(a.session_id, "architecture", "Use PostgreSQL", rationale="one dialect",
                                    alternatives=[{"option": "SQLite", "why_not": "no RLS"}])
    service.update_decision(first.decision_id, 1, summary="Use PostgreSQL 16", status="proposed")
    second = service.record_decision(b.session_id, "architecture", "Use PostgreSQL 18",
                                     supersedes=first.decision_id, message_seq=2)
    service.record_decision(b.session_id, "style", "Secret plan", visibility="private", status="rejected")
    for value in ("draft", {"stack": ["python", "postgres"]}, "final"):
        service.set_context(b.session_id, "stack", value)
    service.set_context(a.session_id, "owner", "team-x")
    service.set_context(empty.session_id, "note", "nothing yet")
    return {"a": a.session_id, "b": b.session_id, "empty": empty.session_id, "fork": fork.session_id,
            "first": first.decision_id, "second": second.decision_id}


def test_restore_from_the_archive_alone_reproduces_a_database_with_unsnapshotted_work(
        service: Service, cli, tmp_path: Path, settings, second_db: str, capsys) -> None:  # noqa: F811
    ids = busy_database(service)
    assert db_rows(settings.dsn, "SELECT version FROM decisions WHERE decision_id = %s", ids["first"]) == [(3,)]
    time.sleep(0.1)  # the policy's idle interval below
    repo = tmp_path / "archive"
    config = {"repo": str(repo), "auto_snapshot_idle_seconds": 0.05}
    capsys.readouterr()
    assert cli("archive", "status", "--json", config=config) == 0
    backlog = json.loads(capsys.readouterr().out)["not_archived"]
    assert (backlog["sessions"], backlog["messages"]) == (4, 15) and backlog["lag_seconds"] >= 0
    assert cli("archive", "--once", config=config) == 0
    out = capsys.readouterr().out  # a, b, empty, fork: each had unarchived work
    assert "exported 6 snapshot(s)" in out and "4 made by the automatic snapshot policy" in out and "0 failed" in out
    auto = db_rows(settings.dsn, "SELECT count(*) FROM snapshots WHERE meta @> '{\"auto\": true}'")
    assert auto == [(4,)]

    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"], report
    assert (report["sessions"], report["decision_versions"], report["context_revisions"]) == (4, 5, 5)
    for query in (SESSIONS, MESSAGES, DECISIONS, VERSIONS, CONTEXT):
        assert db_rows(second_db, query) == db_rows(settings.dsn, query), query
    statuses = db_rows(second_db, "SELECT summary, status, version, supersedes, superseded_by, visibility "
                                  "FROM decisions ORDER BY created_at")
    assert statuses[0] == ("Use PostgreSQL 16", "superseded", 3, None, ids["second"], "team")
    assert statuses[1] == ("Use PostgreSQL 18", "accepted", 1, ids["first"], None, "team")
    assert statuses[2][1:] == ("rejected", 1, None, None, "private")

    # nothing changed since: the policy makes no snapshot, and verify finds everything equal
    assert cli("archive", "--once", config=config) == 0
    assert "exported 0 snapshot(s) (0 new line(s)) to" in capsys.readouterr().out
    assert cli("archive", "status", config=config) == 0
    assert "not archived yet: nothing" in capsys.readouterr().out
    assert verify(service.db, repo).ok
    # the restored database is as archived: a restore of it and the original compare equal
    restored = build(replace(settings, dsn=second_db))
    try:
        assert verify(restored.db, repo).ok
    finally:
        restored.db.close()


def test_verify_names_an_edited_decision_and_context_line(service: Service, cli, tmp_path: Path,  # noqa: F811
                                                           capsys) -> None:
    ids = busy_database(service)
    time.sleep(0.1)
    repo = tmp_path / "archive"
    assert cli("archive", "--once", config={"repo": str(repo), "auto_snapshot_idle_seconds": 0.05}) == 0
    path = repo / layout.decisions_path(ids["b"])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["status"] = "accepted" if rows[0]["status"] != "accepted" else "rejected"
    path.write_text("".join(layout.memory_line(r) for r in rows))
    context = repo / layout.context_path(ids["b"])
    context.write_text(context.read_text() + "not json\n")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "edit"],
                   cwd=repo, check=True)
    report = verify(service.db, repo)
    assert any(f"decision {rows[0]['decision_id']} version {rows[0]['version']} differs from the database (status)"
               in d for d in report.differences), report.differences
    assert any(f"{layout.context_path(ids['b'])}:4: not JSON" in d for d in report.differences), report.differences


def test_the_policy_snapshots_only_what_changed_and_waits_for_idle_or_many_messages(
        service: Service, settings, tmp_path: Path) -> None:
    quiet = service.create_session("proj")
    service.append_messages(quiet.session_id, messages(3))
    busy = service.create_session("proj")
    service.append_messages(busy.session_id, messages(12))
    archiver = Archiver(service.db, ArchiverOptions(repo=tmp_path / "archive",
                                                    auto=AutoSnapshot(idle_seconds=3600, every_messages=10)))
    summary = archiver.run(once=True)
    assert (summary.auto_snapshots, summary.exported) == (1, 1)  # busy: 12 messages ≥ 10; quiet is not idle yet
    assert db_rows(settings.dsn, "SELECT session_id, up_to_seq FROM snapshots") == [(busy.session_id, 12)]
    service.set_context(busy.session_id, "k", "v")  # a change that is no message: it waits for idle
    again = Archiver(service.db, ArchiverOptions(repo=tmp_path / "archive",
                                                 auto=AutoSnapshot(idle_seconds=3600, every_messages=10))).run(once=True)
    assert again.auto_snapshots == 0
    time.sleep(0.1)
    idle = Archiver(service.db, ArchiverOptions(repo=tmp_path / "archive",
                                                auto=AutoSnapshot(idle_seconds=0.05, every_messages=0))).run(once=True)
    assert (idle.auto_snapshots, idle.exported) == (2, 2)  # quiet (never snapshotted) and busy (its context)
    off = Archiver(service.db, ArchiverOptions(repo=tmp_path / "archive",
                                               auto=AutoSnapshot(enabled=False, idle_seconds=0.05))).run(once=True)
    assert off.auto_snapshots == 0


def test_an_archiver_token_snapshots_its_projects_only_and_archives_private_decisions(
        service: Service, settings, make_token, tmp_path: Path) -> None:  # noqa: F811
    mine = service.create_session("A")
    service.append_messages(mine.session_id, messages(2))
    other = service.create_session("B")
    service.append_messages(other.session_id, messages(2))
    writer = make_token("w", ["A"])
    host = token_service(settings, writer)
    try:
        hidden = host.record_decision(mine.session_id, "plan", "only the author sees this", visibility="private")
    finally:
        host.db.close()
    archiver = make_token("arch", ["A"], archiver=True)
    db = Database(replace(settings, dsn=archiver.dsn, password=archiver.token, auto_migrate=False,
                          pool_min=0, pool_max=2), application_name="archiver@test")
    time.sleep(0.1)
    try:
        # read-only in the database: no snapshot by hand
        with connect_as(archiver) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO snapshots (session_id, project_id, up_to_seq) VALUES (%s, 'A', 2)",
                         (mine.session_id,))
        # the policy needs the lease
        with connect_as(archiver, autocommit=True) as conn, pytest.raises(psycopg.Error, match="archiver lease"):
            conn.execute("SELECT * FROM mm_auto_snapshot(0.05, 0, 10)")
        summary = Archiver(db, ArchiverOptions(repo=tmp_path / "archive",
                                               auto=AutoSnapshot(idle_seconds=0.05))).run(once=True)
    finally:
        db.close()
    assert (summary.auto_snapshots, summary.exported, summary.failed) == (1, 1, 0)
    assert db_rows(settings.dsn, "SELECT session_id, created_by FROM snapshots") == [(mine.session_id, archiver.role)]
    archived = (tmp_path / "archive" / layout.decisions_path(mine.session_id)).read_text()
    assert hidden.decision_id in archived and "only the author sees this" in archived
    # the versions table is the archiver's, not a way around visibility
    with connect_as(writer) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT * FROM decision_versions")


def test_crafted_decision_and_context_lines_are_listed_and_the_rest_restored(
        service: Service, cli, tmp_path: Path, second_db: str, capsys) -> None:  # noqa: F811
    ids = busy_database(service)
    time.sleep(0.1)
    repo = tmp_path / "archive"
    assert cli("archive", "--once", config={"repo": str(repo), "auto_snapshot_idle_seconds": 0.05}) == 0
    decisions = repo / layout.decisions_path(ids["b"])
    good = json.loads(decisions.read_text().splitlines()[0])
    crafted = [
        "[1, 2]",  # not an object
        json.dumps({**good, "version": "7"}),  # not an integer version
        json.dumps({**good, "decision_id": "dec_../../etc"}),
        json.dumps({**good, "decision_id": "dec_" + "a" * 32, "status": "bogus"}),  # the database refuses it
        json.dumps({**good, "decision_id": "dec_" + "b" * 32, "session_id": ids["a"], "project_id": "elsewhere"}),
        "[" * 100_000 + "]" * 100_000,  # nested beyond any parser's depth
    ]
    decisions.write_text(decisions.read_text() + "".join(line + "\n" for line in crafted))
    context = repo / layout.context_path(ids["b"])
    context.write_text(context.read_text() + json.dumps({"key": "k" * 300, "revision": 1, "value": 1}) + "\n")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "crafted"],
                   cwd=repo, check=True)
    capsys.readouterr()
    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    bad = {(b["file"], b["line"]): b["why"] for b in report["bad_lines"]}
    base = len(decisions.read_text().splitlines()) - len(crafted)
    path = layout.decisions_path(ids["b"])
    assert "not a decision line" in bad[(path, base + 1)]
    assert "version must be a positive integer" in bad[(path, base + 2)]
    assert "decision_id must be dec_" in bad[(path, base + 3)]
    assert "the database refused it" in bad[(path, base + 4)] and "status" in bad[(path, base + 4)]
    assert "nested too deeply" in bad[(path, base + 6)]
    assert "the database refused it" in bad[(layout.context_path(ids["b"]), 4)]
    assert (report["sessions"], report["decision_versions"], report["context_revisions"]) == (4, 6, 5)
    # the line naming another session and project is restored into the file's own session and project
    moved = db_rows(second_db, "SELECT session_id, project_id FROM decisions WHERE decision_id = %s",
                    "dec_" + "b" * 32)
    assert moved == [(ids["b"], "proj")]


def test_after_upgrading_only_sessions_with_decisions_or_context_are_snapshotted_again(empty_db: str) -> None:
    """Schema 14 with two sessions, both snapshotted and exported, one of them with a decision and a
    context value: after 0016 the policy snapshots that one (its decision and context reach git) and
    leaves the other alone — no snapshot wave after an upgrade."""
    from mcp_memory.store import migrate

    plain, memory = "ses_00000000-0000-4000-8000-0000000000a1", "ses_00000000-0000-4000-8000-0000000000a2"
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute(migrate._BOOTSTRAP)
        for m in migrate.available():
            if m.version >= 16:
                break
            with conn.transaction():
                conn.execute(m.sql)
                conn.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                             (m.version, m.name, m.checksum))
        for sid in (plain, memory):
            conn.execute("INSERT INTO sessions (session_id, project_id, last_seq, updated_at) "
                         "VALUES (%s, 'old', 0, now() - interval '1 hour')", (sid,))
            conn.execute("INSERT INTO snapshots (session_id, project_id, up_to_seq) VALUES (%s, 'old', 0)", (sid,))
        conn.execute("INSERT INTO decisions (session_id, decision_id, project_id, decision_type, summary) "
                     "VALUES (%s, %s, 'old', 'plan', 'kept from before')", (memory, "dec_" + "c" * 32))
        conn.execute("INSERT INTO session_context (session_id, key, revision, project_id, value) "
                     "VALUES (%s, 'k', 1, 'old', '1')", (memory,))
    migrate.migrate(empty_db)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        assert conn.execute("SELECT mm_archive_acquire('upgrade-test', 60)").fetchone() == (True,)
        made = conn.execute("SELECT session_id FROM mm_auto_snapshot(60, 0, 100)").fetchall()
        assert made == [(memory,)]
        versions = conn.execute("SELECT decision_id, version FROM decision_versions").fetchall()
        assert versions == [("dec_" + "c" * 32, 1)]
        assert conn.execute("SELECT * FROM mm_auto_snapshot(60, 0, 100)").fetchall() == []  # nothing left
