"""The team set-up drill (scripts/ops/team_drill.py) against the external PostgreSQL of
MCP_MEMORY_TEST_DSN: install/README.md and install/pgbouncer/README.md followed step by step (central
database, PgBouncer tier, two hosts, archiver + standby, serve-http and a reviewer), then doctor, live
tail, rotations, restore from the archive and the point-in-time restore checklist. Every step must pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DRILL = Path(__file__).resolve().parents[2] / "scripts" / "ops" / "team_drill.py"
PGBOUNCER = "/usr/sbin/pgbouncer"


def test_a_team_set_up_from_the_guide_passes_every_step(tmp_path: Path) -> None:
    dsn = os.environ.get("MCP_MEMORY_TEST_DSN")
    if not dsn:
        pytest.skip("the team drill needs a central PostgreSQL server: set MCP_MEMORY_TEST_DSN (a superuser DSN)")
    import shutil

    if not (shutil.which("pgbouncer") or os.access(PGBOUNCER, os.X_OK)):
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    workdir = Path(os.environ.get("TMPDIR", "/tmp"))  # PgBouncer (another user) reads its folder there
    done = subprocess.run([sys.executable, str(DRILL), "--dsn", dsn, "--json", "--workdir", str(workdir)],
                          capture_output=True, text=True, timeout=1500)
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout)
    failed = [(s["step"], s.get("detail")) for s in report["steps"] if s["status"] != "PASS"]
    assert not failed, json.dumps(failed, indent=1)
    assert done.returncode == 0 and report["ok"]
    names = [s["step"] for s in report["steps"]]
    assert any("rotate of a host" in n for n in names) and any("restore from the archive" in n for n in names)
