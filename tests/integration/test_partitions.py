"""Month partitions (migration 0021): each session's rows in one partition, months created ahead and
out of the default partition, forks read across months, append_id idempotence, a month retired whole."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date

import psycopg
import pytest
from conftest import scratch_database
from partition_support import old_session

from mcp_memory.errors import Conflict, Invalid, Retired
from mcp_memory.store import partitions

OLD = date(2025, 3, 1)  # a past month: no partition of its own until mm_ensure_partitions sees its rows
TABLES = ("messages", "message_search")


def holders(dsn: str, table: str, session_id: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f"SELECT DISTINCT tableoid::regclass::text FROM {table} WHERE session_id = %s",
                            (session_id,)).fetchall()
    return {r[0] for r in rows}


def texts(service, session_id: str) -> list[str]:
    return [m.content for m in service.read_session(session_id, view="full", limit=1000).messages]


def test_a_session_lives_in_one_partition_and_forks_read_across_months(service, fresh_db: str) -> None:
    old = old_session(fresh_db, "P", OLD)
    small = service.append_messages(old, [{"role": "user", "content": f"old {i}", "append_id": f"o{i}"}
                                          for i in range(3)])  # the append function
    assert holders(fresh_db, "messages", old) == {"messages_default"}  # no partition for 2025-03 yet
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        made = partitions.ensure(conn, 3)
    assert "public.messages_p2025_03" in made and "public.message_search_p2025_03" in made
    assert holders(fresh_db, "messages", old) == {"messages_p2025_03"}  # moved out of the default partition
    big = service.append_messages(old, [{"role": "user", "content": f"old {i}", "append_id": f"o{i}"}
                                        for i in range(3, 80)])  # ≥ 64 rows of an owner: COPY
    assert small.seqs == [1, 2, 3] and big.seqs == list(range(4, 81))
    assert holders(fresh_db, "messages", old) == {"messages_p2025_03"}
    service.reindex_search()
    assert holders(fresh_db, "message_search", old) == {"message_search_p2025_03"}
    # idempotent append_id: the same message again is a duplicate at its seq, in either path
    again = service.append_messages(old, [{"role": "user", "content": "old 1", "append_id": "o1"}])
    assert again.seqs == [2] and again.duplicates == [True]
    with pytest.raises(Conflict):
        service.append_message(old, {"role": "user", "content": "changed", "append_id": "o1"})
    # a fork starts in this month: its own rows there, its prefix read from the parent's month
    snap = service.create_snapshot(old, "s")
    fork = service.load_snapshot(snap.snapshot_id).session_id
    service.append_message(fork, {"role": "user", "content": "new", "append_id": "n1"})
    this_month = f"messages_p{date.today():%Y_%m}"
    assert holders(fresh_db, "messages", fork) == {this_month}
    assert texts(service, fork) == [f"old {i}" for i in range(80)] + ["new"]
    assert [m.seq for m in service.read_session(fork, after_seq=78, view="full").messages] == [79, 80, 81]
    with psycopg.connect(fresh_db) as conn:
        bad = conn.execute("SELECT count(*) FROM messages m JOIN sessions s USING (session_id) "
                           "WHERE m.part_month <> s.part_month").fetchone()
        assert bad == (0,)
        with pytest.raises(psycopg.Error, match="may not change"):
            conn.execute("UPDATE sessions SET created_at = now() WHERE session_id = %s", (old,))


def test_months_ahead_are_created_once(fresh_db: str) -> None:
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        first = partitions.ensure(conn, 6)
        assert partitions.ensure(conn, 6) == []
        names = {p.name for p in partitions.layout(conn)}
    today = date.today()
    sixth = date(today.year + (today.month + 5) // 12, (today.month + 5) % 12 + 1, 1)
    assert f"public.messages_p{sixth:%Y_%m}" in first and f"messages_p{sixth:%Y_%m}" in names
    assert {"messages_default", "message_search_default"} <= names
    with psycopg.connect(fresh_db, autocommit=True) as conn, pytest.raises(Invalid, match="months_ahead"):
        partitions.ensure(conn, 500)


def cli(env: dict[str, str], dsn: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", "--dsn", dsn, *args], env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def test_retiring_a_month_detaches_it_and_reads_answer_a_coded_error(service, fresh_db: str,
                                                                     profile: dict[str, str]) -> None:
    old = old_session(fresh_db, "P", OLD)
    other = old_session(fresh_db, "P", date(2025, 4, 1))
    service.append_messages(old, [{"role": "user", "content": f"m{i}"} for i in range(5)])
    service.append_messages(other, [{"role": "user", "content": "april"}])
    fork = service.load_snapshot(service.create_snapshot(old, "s").snapshot_id).session_id
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        partitions.ensure(conn, 0)
        with pytest.raises(Invalid, match="not over yet"):
            partitions.retire(conn, date.today().replace(day=1), drop=False)
        done = partitions.retire(conn, OLD, drop=False)
        assert (done.month, done.sessions, done.messages, done.dropped) == ("2025-03", 1, 5, False)
        assert "messages_p2025_03" in done.detached
        # the month left the hot table whole: kept as a plain table, no longer a partition
        assert conn.execute("SELECT count(*) FROM messages WHERE session_id = %s", (old,)).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM messages_p2025_03").fetchone() == (5,)
        assert conn.execute("SELECT relispartition FROM pg_class WHERE oid = 'messages_p2025_03'::regclass"
                            ).fetchone() == (False,)
        with pytest.raises(Conflict, match="already retired"):
            partitions.retire(conn, OLD, drop=True)
    with pytest.raises(Retired, match=r"its messages are in month 2025-03, which has retired") as caught:
        service.read_session(old)
    assert caught.value.render().startswith("[unavailable] ")
    with pytest.raises(Retired, match=f"its ancestor {old}'s messages are in month 2025-03"):
        service.read_session(fork)
    with pytest.raises(Conflict, match="retired"):
        service.append_message(old, {"role": "user", "content": "late"})
    assert texts(service, other) == ["april"]  # the next month is untouched
    # the command: dropping needs a verified archive (tests/integration/archive/test_cold_months.py);
    # retire April as kept tables, JSON out
    refused = cli(profile, fresh_db, "db", "partitions", "--retire", "2025-04", "--drop")
    assert refused.returncode != 0 and "[invalid] --drop needs --archive PATH" in refused.stderr
    done_cli = cli(profile, fresh_db, "db", "partitions", "--retire", "2025-04", "--json")
    assert done_cli.returncode == 0, done_cli.stderr
    out = json.loads(done_cli.stdout)
    assert out["retired"]["month"] == "2025-04" and out["retired"]["dropped"] is False
    assert out["retired"]["archive_commit"] is None
    assert not any(p["name"].endswith("_p2025_04") for p in out["partitions"])
    bad = cli(profile, fresh_db, "db", "partitions", "--retire", "April")
    assert bad.returncode != 0 and "[invalid] month must be YYYY-MM" in bad.stderr and "Traceback" not in bad.stderr


def test_partitions_on_a_database_never_migrated_migrates_first(admin_dsn: str, profile: dict[str, str]) -> None:
    """`db partitions` may be the first command run against a database: the schema is made first
    (auto_migrate), as for every other command (before, retiring answered an internal error:
    mm_retire_month did not exist yet)."""
    with scratch_database(admin_dsn, "mm_empty") as dsn:
        done = cli(profile, dsn, "db", "partitions", "--retire", "2025-01", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["retired"]["month"] == "2025-01"
