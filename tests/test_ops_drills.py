"""The operations drills of the admin guide (install/README.md) run for real: the point-in-time
restore drill (scripts/ops/pitr_drill.py) builds its own PostgreSQL 15 cluster, restores it to a
point in time and checks the data and the hosts; it needs the server binaries and, as root, the
`postgres` user to run them."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PG_BIN = Path(os.environ.get("MCP_MEMORY_DRILL_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _can_run_server() -> str | None:
    """Why the drill cannot run here, or None."""
    if not all((PG_BIN / tool).is_file() for tool in ("initdb", "pg_ctl", "pg_basebackup", "postgres")):
        return f"no PostgreSQL server binaries in {PG_BIN}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a `postgres` user to run the server"
    return None


@pytest.mark.skipif(_can_run_server() is not None, reason=_can_run_server() or "")
def test_pitr_drill_restores_to_the_target_and_hosts_carry_on() -> None:
    work = Path(tempfile.mkdtemp(prefix="mm-drill-"))  # not pytest's 0700 tmp_path: the server user enters it
    work.chmod(0o755)
    try:
        done = subprocess.run([sys.executable, str(ROOT / "scripts" / "ops" / "pitr_drill.py"), "--pg-bin", str(PG_BIN),
                               "--workdir", str(work)], capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        out = done.stdout
        at_target = re.search(r"at_target: (\{.*\})", out)
        restored = re.search(r"restored: (\{.*\})", out)
        lost = re.search(r"lost_after_target \(expected\): (\{.*\})", out)
        assert at_target and restored and lost, out
        assert at_target.group(1) == restored.group(1)
        assert "'messages': 0" not in lost.group(1) and "'sessions': 0" not in lost.group(1)
        assert re.search(r"host_after_restore: \{'mcp_append_seq': \d+", out)
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
