"""Retention to cold storage (archive/cold.py, migration 0024): a month leaves the hot tables only
when the git archive holds it, and comes back from the archive losslessly."""

from __future__ import annotations

import json
import subprocess
from datetime import date
from pathlib import Path

import psycopg
import pytest
from archive_support import git
from partition_support import old_session

from mcp_memory.archive import cold, layout
from mcp_memory.errors import Conflict, Invalid, NotFound, Retired
from mcp_memory.store import partitions

pytest_plugins = ["archive_support"]  # the fixture `cli`

MARCH, APRIL = date(2025, 3, 1), date(2025, 4, 1)


def exported(service, session_id: str) -> list[tuple[str, str]]:
    """The session as exported to another agent: the bytes a user would get."""
    files = service.export_session(session_id, "openai", options={"reasoning": "none"}).files
    return [(f.name, f.content) for f in files or []]


def payloads(service, session_id: str) -> list[dict]:
    return [m.model_dump(mode="json") for m in service.read_session(session_id, view="full", limit=1000).messages]


def found(service, session_id: str, words: str) -> bool:
    hits = service.search_messages(words, project_id="P", mode="fts", limit=50).matches
    return any(hit.session_id == session_id for hit in hits)


def month_tables(dsn: str, month: date) -> dict[str, bool]:
    """name → still a partition, for the month's tables of messages and search rows (embeddings have
    one too where the server has pgvector)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT relname, relispartition FROM pg_class WHERE relname LIKE %s AND relkind = 'r'",
                            (f"%\\_p{month:%Y_%m}",)).fetchall()
    return {name: part for name, part in rows if not name.startswith("message_embeddings")}


def test_a_month_leaves_only_when_archived_and_comes_back_byte_identical(service, fresh_db: str, settings, cli,
                                                                         tmp_path: Path) -> None:
    db = service.db
    march = old_session(fresh_db, "P", MARCH)
    service.append_messages(march, [{"role": "user" if i % 2 == 0 else "assistant",
                                     "content": f"march {i} the payment ledger 账本 {i}"} for i in range(6)])
    fork = service.load_snapshot(service.create_snapshot(march, "before cold").snapshot_id).session_id
    service.append_messages(fork, [{"role": "user", "content": "a fork's own line"}])
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        partitions.ensure(conn, 0)
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    before = (exported(service, march), payloads(service, march), exported(service, fork))
    assert found(service, march, "payment ledger")

    # a message the archive does not hold yet: the month stays, nothing detached
    service.append_message(march, {"role": "user", "content": "late march line"})
    with pytest.raises(Conflict, match=rf"month 2025-03 stays in the hot tables: .*{march}: 6 line\(s\) in the "
                                       r"archive, 7 message\(s\) in the database"):
        cold.retire(db, MARCH, archive=repo, drop=True)
    assert month_tables(fresh_db, MARCH) == {"messages_p2025_03": True, "message_search_p2025_03": True}
    with pytest.raises(Invalid, match="--drop needs --archive"):
        cold.retire(db, MARCH, archive=None, drop=True)

    service.create_snapshot(march, "the late line")
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    before = (exported(service, march), payloads(service, march), exported(service, fork))
    head = git(repo, "rev-parse", "HEAD").strip()
    done = cold.retire(db, MARCH, archive=repo, drop=True)
    assert (done.retirement.month, done.retirement.sessions, done.retirement.messages) == ("2025-03", 1, 7)
    assert done.archive_commit == head and done.retirement.dropped
    assert month_tables(fresh_db, MARCH) == {}  # dropped: the archive is the cold copy
    with pytest.raises(Retired, match="2025-03, which has retired"):
        service.read_session(march)
    with pytest.raises(Retired, match=f"its ancestor {march}'s messages"):
        service.read_session(fork)
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT archive_commit FROM retired_months WHERE part_month = %s",
                            (MARCH,)).fetchone() == (head,)

    # a dropped month needs the archive to come back; an edited archive brings nothing back
    with pytest.raises(Invalid, match="was dropped: --archive PATH is needed"):
        cold.restore(db, MARCH, archive=None)
    edited = tmp_path / "edited"
    subprocess.run(["git", "clone", "-q", str(repo), str(edited)], check=True)
    path = edited / layout.session_path(march)
    path.write_text(path.read_text().replace("march 3 the payment", "march 3 THE payment"))
    git(edited, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "edit a line")
    with pytest.raises(Conflict, match=r"cannot bring the month back whole.*was edited"):
        cold.restore(db, MARCH, archive=edited)
    with pytest.raises(Retired):
        service.read_session(march)

    back = cold.restore(db, MARCH, archive=repo)
    assert (back.sessions, back.messages, back.attached) == (1, 7, False) and back.indexed >= 7
    assert (exported(service, march), payloads(service, march), exported(service, fork)) == before
    assert found(service, march, "payment ledger")
    assert service.append_message(march, {"role": "user", "content": "march goes on"}).seq == 8
    with pytest.raises(NotFound, match="2025-03 has not retired"):
        cold.restore(db, MARCH, archive=repo)


def test_a_kept_month_is_attached_again_and_the_command_speaks_json(service, fresh_db: str, cli, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    april = old_session(fresh_db, "P", APRIL)
    service.append_messages(april, [{"role": "user", "content": f"april {i}"} for i in range(3)])
    service.create_snapshot(april, "april")
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        partitions.ensure(conn, 0)
    before = payloads(service, april)
    capsys.readouterr()
    assert cli("db", "partitions", "--retire", "2025-04", "--archive", str(repo), "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["retired"]["dropped"] is False and out["retired"]["verified_messages"] == 3
    assert len(out["retired"]["archive_commit"]) == 40
    assert month_tables(fresh_db, APRIL) == {"messages_p2025_04": False, "message_search_p2025_04": False}
    assert cli("db", "partitions", "--restore", "2025-04", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["restored"]["attached"] is True and out["restored"]["sessions"] == 1
    assert month_tables(fresh_db, APRIL) == {"messages_p2025_04": True, "message_search_p2025_04": True}
    assert payloads(service, april) == before
    # refusals name the rule, exit non-zero, and change nothing
    assert cli("db", "partitions", "--restore", "2025-04", "--drop") != 0
    assert "[invalid] --drop goes with --retire" in capsys.readouterr().err
    assert cli("db", "partitions", "--archive", str(repo)) != 0
    assert "[invalid] --drop and --archive go with --retire" in capsys.readouterr().err
