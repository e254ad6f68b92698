"""Helpers and fixtures of the archive tests (real git repositories, a second database, the
in-process `mcp-memory` command), shared by the archive, redaction and PgBouncer tests."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conftest import scratch_database

from mcp_memory.archive import layout
from mcp_memory.cli import main
from mcp_memory.config import Settings


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def bare_remote(tmp_path: Path, name: str = "remote.git") -> Path:
    path = tmp_path / name
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    return path


def archive_lines(repo: Path, session_id: str) -> list[dict]:
    path = repo / layout.session_path(session_id)
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def db_rows(dsn: str, sql: str, *params: object) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()


def job_states(dsn: str) -> dict[int, tuple[str, int, str | None]]:
    rows = db_rows(dsn, "SELECT snapshot_id, status, attempts, last_error FROM export_jobs ORDER BY snapshot_id")
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def messages(n: int, prefix: str = "m") -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{prefix} {i} héllo 你好",
             "append_id": f"{prefix}-{i}-{uuid.uuid4().hex[:6]}"} for i in range(n)]


@pytest.fixture
def cli(settings: Settings, profile: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run `mcp-memory --dsn <test db> …` in-process; `config` writes [archive] settings first."""
    for key, value in profile.items():
        monkeypatch.setenv(key, value)

    def run(*args: str, config: dict | None = None) -> int:
        if config is not None:
            path = tmp_path / "config.toml"
            path.write_text("[archive]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in config.items()))
            monkeypatch.setenv("MCP_MEMORY_CONFIG", str(path))
        return main(["--dsn", settings.dsn, *args])

    return run


@pytest.fixture
def second_db(admin_dsn: str, template_db: str) -> Iterator[str]:
    with scratch_database(admin_dsn, "mm_restore", template_db) as dsn:
        yield dsn
