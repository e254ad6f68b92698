"""The operations drills of the admin guide (install/README.md) run for real: the point-in-time
restore drill (scripts/ops/pitr_drill.py) builds its own PostgreSQL 15 cluster, restores it to a
point in time and checks the data and the hosts; it needs the server binaries and, as root, the
`postgres` user to run them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from pg_servers_support import pg_bin, why_not

from mcp_memory.errors import Unavailable
from mcp_memory.wiring import build

pytest_plugins = ["security_support"]
ROOT = Path(__file__).resolve().parents[3]
PG_BIN = pg_bin("MCP_MEMORY_DRILL_PG_BIN")


def _can_run_server() -> str | None:
    return why_not(PG_BIN, ("initdb", "pg_ctl", "pg_basebackup", "postgres"))


@pytest.mark.skipif(_can_run_server() is not None, reason=_can_run_server() or "")
def test_pitr_drill_restores_to_the_target_and_hosts_carry_on() -> None:
    work = Path(tempfile.mkdtemp(prefix="mm-drill-"))  # not pytest's 0700 tmp_path: the server user enters it
    work.chmod(0o755)
    try:
        drill = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "ops" / "pitr_drill.py"), "--pg-bin",
                                  str(PG_BIN), "--workdir", str(work)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        try:
            out, err = drill.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            drill.terminate()  # SIGTERM: the drill stops its servers and removes its folders
            out, err = drill.communicate(timeout=120)
            pytest.fail(f"the drill took more than 300 s:\n{out}\n{err}")
        assert drill.returncode == 0, out + err
        at_target = re.search(r"at_target: (\{.*\})", out)
        restored = re.search(r"restored: (\{.*\})", out)
        lost = re.search(r"lost_after_target \(expected\): (\{.*\})", out)
        assert at_target and restored and lost, out
        assert at_target.group(1) == restored.group(1)
        assert "'messages': 0" not in lost.group(1) and "'sessions': 0" not in lost.group(1)
        assert re.search(r"host_after_restore: \{'mcp_append_seq': \d+", out)
        archive = re.search(r"archive: \{'newest_tag_before_restore': (\d+), 'restored_max_snapshot': (\d+), "
                            r"'new_snapshot_exported': (\d+)\}", out)
        assert archive and int(archive.group(2)) < int(archive.group(1)) < int(archive.group(3)), out
        assert list(work.iterdir()) == []  # the drill removed its folders
    finally:
        shutil.rmtree(work, ignore_errors=True)
    leftover = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(work) not in leftover  # no server of the drill still running


def test_pitr_drill_refuses_missing_binaries(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "ops" / "pitr_drill.py"), "--pg-bin", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "initdb is missing" in done.stderr


def _unit() -> dict[str, list[str]]:
    """The [Service] settings of install/mcp-memory-archive.service (repeated keys kept in order)."""
    settings: dict[str, list[str]] = {}
    section = ""
    for line in (ROOT / "install" / "mcp-memory-archive.service").read_text().splitlines():
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_archiver_install_sets_up_what_the_service_unit_expects(tmp_path: Path) -> None:
    unit = _unit()
    user, exe = unit["User"][0], unit["ExecStart"][0].split()[0]
    env = dict(value.split("=", 1) for value in unit["Environment"])
    token_file = unit["EnvironmentFile"][0]
    assert not token_file.startswith("-")  # no token, no start: said at once, not a login failure later
    assert "MCP_MEMORY_DSN" not in env and "MCP_MEMORY_PASSWORD" not in env  # nothing secret in the unit
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "systemctl").write_text("#!/bin/sh\nexit 0\n")
    (fake_bin / "systemctl").chmod(0o755)
    done = subprocess.run(["bash", str(ROOT / "install" / "install.sh"), "--dsn", "postgresql://archiver@db.example/mem",
                           "--archiver", "--archive-remote", "git@git.example:team/archive.git", "--no-agents",
                           "--dry-run"], capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": f"{fake_bin}:/usr/bin:/bin", "HOME": str(tmp_path),
                               "XDG_DATA_HOME": str(tmp_path / "data")})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    exists = subprocess.run(["id", user], capture_output=True, check=False).returncode == 0
    assert exists or f"useradd --system --home-dir {unit['WorkingDirectory'][0]}" in out
    assert re.search(rf"ln -sf \S+ {re.escape(exe)}$", out, re.M)  # the program where ExecStart runs it
    assert f"write {env['MCP_MEMORY_CONFIG']} (mode 0640, owner root:{user})" in out
    assert f"write {token_file} (mode 0640, owner root:{user})" in out
    assert env["MCP_MEMORY_HOME"] in unit["ReadWritePaths"][0].split()
    assert "/etc/systemd/system/mcp-memory-archive.service" in out and "<token>" not in out
    assert not (tmp_path / "data").exists()  # a dry run installs nothing


# the database releases behind this code: migrations 0024, 0022, 0019 and 0018 undone, 0023 and 0021
# unrecorded (their steps run again on their own result: the tables are already partitioned, the
# append function is replaced)
ROLLBACK = (
    # 0033 (snapshot ids past the archive), 0031 (time ranges), 0030 (search as a definer)
    "DROP FUNCTION mm_archive_renumber_snapshot(bigint, bigint)", "DROP FUNCTION mm_archive_snapshot_floor(bigint)",
    "DELETE FROM schema_migrations WHERE version = 33",
    "ALTER TABLE sessions DROP CONSTRAINT sessions_created_at_range",
    "ALTER TABLE sessions DROP CONSTRAINT sessions_updated_at_range",
    "ALTER TABLE messages DROP CONSTRAINT messages_created_at_range",
    "ALTER TABLE snapshots DROP CONSTRAINT snapshots_created_at_range",
    "ALTER TABLE decisions DROP CONSTRAINT decisions_times_range",
    "ALTER TABLE session_context DROP CONSTRAINT session_context_created_at_range",
    "DELETE FROM schema_migrations WHERE version = 31",
    "DROP FUNCTION mm_search_candidates(tsquery, text[], double precision[], double precision, double precision, "
    "double precision, integer, boolean, boolean, text, text, timestamptz, timestamptz, text, text[], bigint[], bigint[])",
    "DROP FUNCTION mm_search_candidates_query(boolean, boolean, boolean, boolean, boolean, boolean, boolean, boolean, "
    "integer)",
    "DELETE FROM schema_migrations WHERE version = 30",
    # 0029 (one caller per token): mm_caller back to 0026's, its policies as 0026 left them
    "DROP POLICY mm_own ON access_tokens", "DROP POLICY mm_own ON access_token_projects",
    "DROP POLICY mm_read ON decisions", "DROP FUNCTION mm_caller()", "ALTER FUNCTION mm_login_role() RENAME TO mm_caller",
    "DROP FUNCTION mm_token_name(text)",
    "CREATE POLICY mm_own ON access_tokens FOR SELECT USING (role_name = (SELECT mm_caller()))",
    "CREATE POLICY mm_own ON access_token_projects FOR SELECT USING (role_name = (SELECT mm_caller()))",
    "CREATE POLICY mm_read ON decisions FOR SELECT USING (visibility = 'public' OR created_by = (SELECT mm_caller()))",
    "DELETE FROM schema_migrations WHERE version = 29",
    "DROP FUNCTION mm_harden_partitions()", "DELETE FROM schema_migrations WHERE version = 25",
            "DROP FUNCTION mm_restore_month(date)", "ALTER TABLE retired_months DROP COLUMN archive_commit",
            "DELETE FROM schema_migrations WHERE version = 24", "DELETE FROM schema_migrations WHERE version = 23", "DROP INDEX message_search_created", "DELETE FROM schema_migrations WHERE version = 22",
            "DELETE FROM schema_migrations WHERE version = 21",
            "DROP SCHEMA mm_read CASCADE", "DROP FUNCTION mm_read_scope()", "DROP FUNCTION mm_read_caller()",
            "DELETE FROM schema_migrations WHERE version = 19",
            "DROP FUNCTION mm_report_host(text, integer, timestamptz)", "DROP FUNCTION mm_host_metrics(float8)",
            "DROP TABLE host_reports", "DELETE FROM schema_migrations WHERE version = 18")


def test_upgrade_order_database_first_then_hosts(fresh_db: str, settings, password_server: str, make_token,
                                                 profile: dict[str, str]) -> None:
    """install/README.md, Upgrades: a host newer than the schema fails its calls until the owner runs
    `db migrate` (a token cannot migrate; with the default auto_migrate it tries and is refused,
    with auto_migrate = false it says to migrate), then the same processes carry on; a host older
    than the schema runs on it."""
    host = make_token("upgrade", ["A"])
    with psycopg.connect(fresh_db, autocommit=True) as conn:  # the database one release behind this code
        for statement in ROLLBACK:
            conn.execute(statement)
    hosts = [build(replace(settings, dsn=host.dsn, password=host.token, pool_min=0, pool_max=2,
                           auto_migrate=auto), application_name="mcp-memory upgrade-test") for auto in (True, False)]
    try:
        with pytest.raises(Unavailable, match=r"at version \d+, this mcp-memory needs \d+: .* run `mcp-memory db "
                                              r"migrate` \(this login may not migrate\)"):
            hosts[0].create_session("A")  # auto_migrate (the default): it tried to migrate as the token
        with pytest.raises(Unavailable, match=r"run `mcp-memory db migrate` \(auto_migrate is off\)"):
            hosts[1].create_session("A")
        migrated = subprocess.run([sys.executable, "-m", "mcp_memory", "db", "migrate"], capture_output=True,
                                  text=True, timeout=120, check=False, env={**profile, "MCP_MEMORY_DSN": fresh_db})
        assert migrated.returncode == 0, migrated.stderr
        assert all(h.create_session("A").session_id for h in hosts)  # the same processes carry on
    finally:
        for h in hosts:
            h.db.close()
    with psycopg.connect(fresh_db, autocommit=True) as conn:  # a schema newer than this code knows
        conn.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (9999, 'future', 'x')")
    older = build(replace(settings, dsn=host.dsn, password=host.token, pool_min=0, pool_max=2),
                  application_name="mcp-memory upgrade-test")
    try:
        assert older.create_session("A").session_id
    finally:
        older.db.close()
