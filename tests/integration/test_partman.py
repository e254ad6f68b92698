"""pg_partman keeps the month partitions where the server has it (store/partman.py, migration 0025):
`db partitions --partman` hands the tables over with their rows where they are, its maintenance makes
the months ahead, every partition it makes gets our protection, retiring and restoring a month still
work, and a server without it answers a coded error. The adoption tests run where the test server has
pg_partman (Debian's postgresql-15-partman in CI's PostgreSQL 15 pass); the embedded server has none."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date

import psycopg
import pytest
from partition_support import old_session
from security_support import connect_as

from mcp_memory.store import partitions, partman

pytest_plugins = ["security_support"]

MARCH = date(2025, 3, 1)


def cli(env: dict[str, str], dsn: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", "--dsn", dsn, *args], env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def has_partman(dsn: str) -> bool:
    with psycopg.connect(dsn) as conn:
        return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_partman')"
                                 ).fetchone()[0])  # type: ignore[index]


def month_after(months: int) -> date:
    today = date.today()
    index = today.year * 12 + today.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def month_tables(conn: psycopg.Connection) -> dict[str, tuple[bool, bool]]:
    """Every partition of the growing tables → (row-level security on, a role beside the owner granted)."""
    rows = conn.execute(
        "SELECT c.relname, c.relrowsecurity, EXISTS (SELECT 1 FROM aclexplode(c.relacl) a WHERE a.grantee <> c.relowner) "
        "FROM unnest(mm_partitioned_tables()) AS t(name) JOIN pg_inherits i ON i.inhparent = to_regclass(t.name) "
        "JOIN pg_class c ON c.oid = i.inhrelid").fetchall()
    return {name: (rls, granted) for name, rls, granted in rows}


def texts(service, session_id: str) -> list[str]:
    return [m.content for m in service.read_session(session_id, view="full", limit=100).messages]


def test_a_server_without_pg_partman_answers_a_coded_error(fresh_db: str, profile: dict[str, str]) -> None:
    if has_partman(fresh_db):
        pytest.skip("this test server has pg_partman (the adoption test runs instead)")
    done = cli(profile, fresh_db, "db", "partitions", "--partman")
    assert done.returncode != 0 and "[unavailable] pg_partman is not installed on this database server" in done.stderr
    assert "Traceback" not in done.stderr
    both = cli(profile, fresh_db, "db", "partitions", "--partman", "--retire", "2025-01")
    assert both.returncode != 0 and "[invalid] --partman goes alone" in both.stderr


def test_pg_partman_takes_the_months_over_and_they_stay_ours_to_retire(service, fresh_db: str, profile: dict[str, str],
                                                                       make_token) -> None:
    if not has_partman(fresh_db):
        pytest.skip("the test server has no pg_partman (Debian: postgresql-15-partman)")
    march = old_session(fresh_db, "P", MARCH)
    service.append_messages(march, [{"role": "user", "content": f"march {i}"} for i in range(3)])
    now = service.create_session("P").session_id
    service.append_messages(now, [{"role": "user", "content": "before"}])
    fork = service.load_snapshot(service.create_snapshot(march, "s").snapshot_id).session_id
    service.append_message(fork, {"role": "user", "content": "forked"})

    # 1. the hand-over: rows stay where they are (the March rows waited in the default partition)
    done = cli(profile, fresh_db, "db", "partitions", "--partman", "--ahead", "2", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["partman"]
    assert out["schema"] == "partman" and {"public.messages", "public.message_search"} <= set(out["adopted"])
    assert "public.messages_p2025_03" in out["made"]
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        config = conn.execute("SELECT parent_table, premake, infinite_time_partitions, retention "
                              "FROM partman.part_config ORDER BY 1").fetchall()
        assert ("public.messages", 2, True, None) in config and ("public.message_search", 2, True, None) in config
        assert conn.execute("SELECT DISTINCT tableoid::regclass::text FROM messages WHERE session_id = %s",
                            (march,)).fetchall() == [("messages_p2025_03",)]
        assert conn.execute("SELECT count(*) FROM messages_default").fetchone() == (0,)
        assert all(rls and not granted for rls, granted in month_tables(conn).values())
        assert partitions.upkeep(conn).partman_keeps
    again = cli(profile, fresh_db, "db", "partitions", "--partman", "--ahead", "2", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["partman"]["adopted"] == []

    # 2. its maintenance makes the months ahead; what it makes unprotected (as its background worker
    #    would) is hardened by the next `db partitions`, and doctor says so meanwhile
    far = month_after(7)
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        with conn.transaction():
            assert partman.maintain(conn, 7)
        assert conn.execute("SELECT mm_month_partition('messages', %s)::text", (far,)).fetchone() == (
            f"messages_p{far:%Y_%m}",)
        bare = [name for name, (rls, _) in month_tables(conn).items() if not rls]
        assert f"messages_p{far:%Y_%m}" in bare
        assert partitions.upkeep(conn).unhardened == len(bare)
    doctor = cli(profile, fresh_db, "doctor", "--json")
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "partitions")
    assert check["warning"] and f"{len(bare)} partitions lack row-level security" in check["detail"]
    token = make_token("partman", ["P"])
    with connect_as(token, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # unprotected, yet no privilege on it
            conn.execute(f"SELECT count(*) FROM messages_p{far:%Y_%m}")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT partman.run_maintenance()")
    upkeep = cli(profile, fresh_db, "db", "partitions", "--ahead", "7", "--json")
    assert upkeep.returncode == 0, upkeep.stderr
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        assert all(rls and not granted for rls, granted in month_tables(conn).values())
        with conn.transaction():  # again, and this time `db migrate` hardens them
            partman.maintain(conn, 9)
        assert partitions.upkeep(conn).unhardened > 0
    assert cli(profile, fresh_db, "db", "migrate").returncode == 0
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        assert partitions.upkeep(conn).unhardened == 0
    doctor = cli(profile, fresh_db, "doctor", "--json")
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "partitions")
    assert not check["warning"] and "pg_partman keeps the months" in check["detail"], check

    # 3. appends, forks and reads as before; a month retires and comes back, and pg_partman's
    #    maintenance does not make the retired month again
    service.append_messages(now, [{"role": "user", "content": "after"}])
    assert texts(service, now) == ["before", "after"]
    assert texts(service, fork) == ["march 0", "march 1", "march 2", "forked"]
    retired = cli(profile, fresh_db, "db", "partitions", "--retire", "2025-03", "--json")
    assert retired.returncode == 0, retired.stderr
    assert "messages_p2025_03" in json.loads(retired.stdout)["retired"]["detached"]
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        with conn.transaction():
            partman.maintain(conn, 7)
        assert conn.execute("SELECT mm_month_partition('messages', %s)", (MARCH,)).fetchone() == (None,)
    restored = cli(profile, fresh_db, "db", "partitions", "--restore", "2025-03", "--json")
    assert restored.returncode == 0, restored.stderr
    assert texts(service, march) == ["march 0", "march 1", "march 2"]
    assert texts(service, fork) == ["march 0", "march 1", "march 2", "forked"]
