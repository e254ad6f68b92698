"""Restore against a crafted archive, and the database's own range for times: a meta file whose
`created_at` is in year 99999 skips its session by file and line (the session list still works), a
message or memory line with such a time is named and the rest restored, every writer (the owner's raw
SQL, COPY and restore; a token's mm_append) meets the 1970–9999 range of migration 0031, and a file of
blank lines costs restore time in proportion to its size with a report of at most a hundred entries."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from archive_support import cli, git, messages, second_db  # noqa: F401  (fixtures)
from psycopg import sql

from mcp_memory.archive import layout, restore
from mcp_memory.cli import main
from mcp_memory.config import Settings
from mcp_memory.core.service import Service
from mcp_memory.errors import Invalid
from mcp_memory.store.db import Database

FAR = "99999-01-01T00:00:00Z"


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", message)


def archived(service: Service, cli, tmp_path: Path, count: int = 2) -> tuple[Path, list[str]]:  # noqa: F811
    ids = []
    for i in range(count):
        s = service.create_session("proj", {"title": f"s{i}"})
        service.append_messages(s.session_id, messages(2))
        service.create_snapshot(s.session_id, "two")
        ids.append(s.session_id)
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    return repo, ids


def test_a_meta_created_in_year_99999_skips_its_session_by_file_and_line(service: Service, cli,  # noqa: F811
                                                                          tmp_path: Path, second_db: str,  # noqa: F811
                                                                          capsys) -> None:
    repo, (bad, good) = archived(service, cli, tmp_path)
    meta = repo / layout.meta_path(bad)
    doc = json.loads(meta.read_text())
    doc["created_at"] = FAR
    meta.write_text(json.dumps(doc, indent=2) + "\n")
    commit_all(repo, "a far future")
    line = next(n for n, text in enumerate(meta.read_text().splitlines(), 1) if text.startswith('  "created_at"'))
    capsys.readouterr()

    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["skipped_sessions"] == [bad] and report["sessions"] == 1
    (entry,) = report["bad_lines"]
    assert (entry["file"], entry["line"]) == (layout.meta_path(bad), line)
    assert entry["why"] == f"created_at '{FAR}' {layout.TIME_RULE}"
    assert main(["--dsn", second_db, "sessions", "--json"]) == 0  # the list shows what was restored
    assert [s["session_id"] for s in json.loads(capsys.readouterr().out)["sessions"]] == [good]


def test_times_out_of_range_in_lines_and_snapshots_are_named_and_the_rest_restored(
        service: Service, cli, tmp_path: Path, second_db: str, capsys) -> None:  # noqa: F811
    repo, (first, second) = archived(service, cli, tmp_path)
    path = repo / layout.session_path(first)
    lines = path.read_text().splitlines(keepends=True)
    row = json.loads(lines[1])
    row["created_at"] = "1500-01-01T00:00:00Z"  # a datetime holds it; the database range does not
    lines[1] = json.dumps(row) + "\n"
    path.write_text("".join(lines))
    decisions = repo / layout.decisions_path(second)
    decisions.parent.mkdir(parents=True, exist_ok=True)
    decisions.write_text(json.dumps({"decision_id": "dec_" + "a" * 32, "version": 1, "summary": "x",
                                     "decision_type": "choice", "created_at": FAR}) + "\n")
    commit_all(repo, "old and far times")
    capsys.readouterr()

    assert main(["--dsn", second_db, "restore", "--from-archive", str(repo), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    by_file = {b["file"]: b for b in report["bad_lines"]}
    assert by_file[layout.session_path(first)]["line"] == 2
    assert by_file[layout.session_path(first)]["why"].startswith(f"created_at '1500-01-01T00:00:00Z' {layout.TIME_RULE}")
    assert by_file[layout.decisions_path(second)] == {"file": layout.decisions_path(second), "line": 1,
                                                      "why": f"created_at '{FAR}' {layout.TIME_RULE}"}
    assert (report["sessions"], report["messages"], report["decision_versions"]) == (2, 3, 0)
    assert main(["--dsn", second_db, "sessions", "--json"]) == 0


@pytest.mark.parametrize("table, column", [("sessions", "updated_at"),
                                           ("messages", "created_at"), ("snapshots", "created_at")])
def test_the_database_refuses_a_time_no_reader_can_show_from_the_owner_too(service: Service, settings: Settings,
                                                                          table: str, column: str) -> None:
    s = service.create_session("proj")
    service.append_messages(s.session_id, messages(1))
    service.create_snapshot(s.session_id, "one")
    with psycopg.connect(settings.dsn) as conn:  # the owner: no write function in the way (a session keeps
        # its created_at by trigger, so that one is tried on a new row below)
        for value in ("99999-01-01 00:00:00+00", "1969-12-31 23:59:59+00", "infinity"):
            with pytest.raises(psycopg.errors.CheckViolation, match=f"{table}_.*_range"), conn.transaction():
                conn.execute(sql.SQL("UPDATE {} SET {} = %s::timestamptz WHERE session_id = %s").format(
                    sql.Identifier(table), sql.Identifier(column)), (value, s.session_id))
        with pytest.raises(psycopg.errors.CheckViolation, match="sessions_created_at_range"), conn.transaction():
            conn.execute("INSERT INTO sessions (session_id, project_id, created_at) VALUES "
                         "('ses_00000000-0000-0000-0000-000000000001', 'proj', '99999-01-01')")


def test_append_and_import_refuse_a_time_before_1970_by_field(service: Service) -> None:
    s = service.create_session("proj")
    with pytest.raises(Invalid, match=r"created_at.*1970-01-01 to 9999-12-31"):
        service.append_message(s.session_id, {"role": "user", "content": "x", "created_at": "1500-01-01T00:00:00Z"})
    with pytest.raises(Invalid, match=r"created_at"):
        service.append_message(s.session_id, {"role": "user", "content": "x", "created_at": FAR})
    assert service.read_session(s.session_id, view="full").messages == []


def restore_seconds(settings: Settings, dsn: str, repo: Path) -> tuple[float, restore.RestoreResult]:
    db = Database(replace(settings, dsn=dsn), application_name="test restore")
    try:
        started = time.perf_counter()
        result = restore.restore(db, repo, force=True)  # the second run adds nothing: the same work but the files
        return time.perf_counter() - started, result
    finally:
        db.close()


def test_a_file_of_blank_lines_restores_in_time_linear_in_its_size_with_a_bounded_report(
        service: Service, cli, tmp_path: Path, settings: Settings, second_db: str) -> None:  # noqa: F811
    repo, (sid,) = archived(service, cli, tmp_path, count=1)
    seconds = {}
    for size in (284_000, 2_840_000):  # 284 KB, then ten times that
        for path in (layout.decisions_path(sid), layout.context_path(sid)):
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_bytes(b"\n" * size)
        commit_all(repo, f"{size} blank lines")
        seconds[size], result = restore_seconds(settings, second_db, repo)
        for path in (layout.decisions_path(sid), layout.context_path(sid)):
            listed = [b for b in result.bad_lines if b.file == path]
            assert len(listed) == restore.LISTED_PER_FILE + 1
            assert listed[0].why == "an empty line" and listed[-1].line == restore.LISTED_PER_FILE + 1
            assert listed[-1].why.startswith(f"and {size - restore.LISTED_PER_FILE} more bad line(s)")
        assert (result.sessions, result.messages) == (1, 2 if size == 284_000 else 0)
    ratio = seconds[2_840_000] / seconds[284_000]
    print(f"blank lines: {seconds}, ratio {ratio:.1f}")
    assert ratio < 20, f"ten times the blank lines took {ratio:.1f} times as long ({seconds})"
