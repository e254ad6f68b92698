"""Ctrl-C during a long import (core/imports.py stores each session whole): a real `mcp-memory
import` subprocess gets SIGINT while it writes a big session; the database then holds nothing of
it (no empty or partial session), the exit code and message say so, and a rerun stores it once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg

MESSAGES = 15_000


def _big_chat(path: Path) -> None:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "words " * 20}
             for i in range(MESSAGES)]
    path.write_text(json.dumps(turns))


def _writing(conn: psycopg.Connection) -> bool:
    """Whether another backend of this database holds a transaction that has written (the import's)."""
    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL").fetchone()
    return bool(row and row[0])


def _counts(conn: psycopg.Connection) -> tuple[int, int]:
    row = conn.execute("SELECT (SELECT count(*) FROM sessions WHERE project_id = 'big'), "
                       "(SELECT count(*) FROM messages WHERE project_id = 'big')").fetchone()
    assert row is not None
    return row[0], row[1]


def test_an_interrupted_import_leaves_nothing_and_a_rerun_stores_it_once(fresh_db: str, profile, tmp_path) -> None:
    chat = tmp_path / "big.json"
    _big_chat(chat)
    env = {**profile, "MCP_MEMORY_DSN": fresh_db}
    command = [sys.executable, "-m", "mcp_memory", "import", "openai", str(chat), "--project", "big"]
    with psycopg.connect(fresh_db, autocommit=True) as watcher:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            while proc.poll() is None and not _writing(watcher):
                time.sleep(0.005)
            assert proc.poll() is None, "the import ended before it was seen writing"
            proc.send_signal(signal.SIGINT)  # by its own pid, mid-way through its session
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 130, (proc.returncode, out, err)
        assert "interrupted" in err and "nothing of the one in progress was written" in err, err
        assert "Traceback" not in err
        assert _counts(watcher) == (0, 0)  # no empty, no partial session

        again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr
        assert _counts(watcher) == (1, MESSAGES)
        once_more = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert once_more.returncode == 0 and f"0 new, {MESSAGES} already stored" in once_more.stdout
        assert _counts(watcher) == (1, MESSAGES)
