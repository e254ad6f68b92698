"""The failover drill (scripts/ops/failover_drill.py) in its short form: a pg_auto_failover formation
of its own (monitor + two data nodes), one switchover under hosts appending through the core over a
multi-host DSN, a live tail and the archiver daemon; nothing acknowledged may be lost and nothing
may need a restart. The full run (five failovers, killed primaries among them) takes minutes and is
run by hand (install/README.md, section 12)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from pg_servers_support import pg_bin, why_not

ROOT = Path(__file__).resolve().parents[2]
PG_BIN = pg_bin("MCP_MEMORY_DRILL_PG_BIN")
BUDGET = 90.0  # the drill after the set-up: workload, one switchover, checks
SETUP = 150.0  # the formation's set-up (three pg_autoctl creates, migrations, tokens): ~45 s on a quiet machine


def _cannot_run() -> str | None:
    if shutil.which("pg_autoctl") is None:
        return "pg_autoctl is not installed (Debian package postgresql-15-auto-failover)"
    return why_not(PG_BIN)


@pytest.mark.own_servers
@pytest.mark.skipif(_cannot_run() is not None, reason=_cannot_run() or "")
def test_a_switchover_loses_no_acknowledged_append_and_needs_no_restart() -> None:
    work = Path(tempfile.mkdtemp(prefix="mm-failover-"))  # the server user enters it: not pytest's 0700 tmp
    work.chmod(0o755)
    started = time.monotonic()
    try:
        drill = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "ops" / "failover_drill.py"), "--pg-bin",
                                  str(PG_BIN), "--workdir", str(work), "--failovers", "switchover",
                                  "--seconds-between", "1", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        try:
            out, err = drill.communicate(timeout=SETUP + BUDGET)
        except subprocess.TimeoutExpired:
            drill.terminate()  # SIGTERM: the drill stops its keepers and workers and removes its folders
            out, err = drill.communicate(timeout=120)
            pytest.fail(f"the short drill took more than {SETUP + BUDGET:g} s:\n{err[-3000:]}")
        assert drill.returncode == 0, err[-5000:]
        summary = json.loads(out)
        [switch] = summary["failovers"]
        before, after = switch["primary"].split(" -> ")
        assert before != after
        assert switch["retries"] > 0  # the hosts were appending when the primary went away
        assert switch["lost_acknowledged"] == 0 and summary["lost_acknowledged"] == 0
        assert summary["acknowledged_appends"] == summary["stored_messages"] > 0
        assert summary["stored_at_another_seq"] == 0 and summary["tail_missed"] == 0
        done, made = summary["snapshots_exported"].split("/")
        assert done == made == "2"
        assert summary["drill_seconds"] < BUDGET, summary
        assert list(work.iterdir()) == []  # the drill removed its folders
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert time.monotonic() - started < SETUP + BUDGET + 5
    leftover = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(work) not in leftover  # no keeper or server of the drill still running
