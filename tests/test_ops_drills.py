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
