"""Test fixtures on real PostgreSQL.

The server is the embedded one (started once in a temporary profile and stopped at the end) or,
when MCP_MEMORY_TEST_DSN is set, that external server. A migrated template database is built once;
each test that needs a database gets a fresh clone of it (CREATE DATABASE … TEMPLATE …).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from mcp_memory.config import Settings, load_settings
from mcp_memory.core.service import Service
from mcp_memory.store import embedded, migrate
from mcp_memory.wiring import build

# The support modules at this folder's root (imported by bare name from every tier) get pytest's
# assertion messages like test modules do; registered before any test module imports them.
pytest.register_assert_rewrite("agent_fixtures", "archive_support", "http_support", "rest_support",
                               "security_support", "semantic_support", "ui_support", "pgbouncer_support")

TEMPLATE = f"mm_template_{os.getpid()}"
# tests make git commits of their own (tampering with an archive): they must not depend on the
# machine's git identity, which a fresh checkout with a new HOME does not have
for _variable, _value in (("GIT_AUTHOR_NAME", "mcp-memory tests"), ("GIT_AUTHOR_EMAIL", "tests@mcp-memory.invalid"),
                          ("GIT_COMMITTER_NAME", "mcp-memory tests"), ("GIT_COMMITTER_EMAIL", "tests@mcp-memory.invalid")):
    os.environ.setdefault(_variable, _value)
# The embedded server refuses root unless told: CI and containers run the tests as root, so the
# tests opt in explicitly (and hand the opt-in to the mcp-memory processes they start).
ROOT_OPT_IN = {"MCP_MEMORY_EMBEDDED_AS_ROOT": "1"} if hasattr(os, "geteuid") and os.geteuid() == 0 else {}


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@contextmanager
def embedded_home() -> Iterator[Path]:
    """A directory for an embedded server's data. Not under pytest's tmp_path: pytest makes its
    root 0700 at every session start, and the server may run as another user (as root: pgserver)."""
    home = Path(tempfile.mkdtemp(prefix="mcp-memory-test-"))
    home.chmod(0o755)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def admin_dsn() -> Iterator[str]:
    """A DSN with the right to create databases, to the `postgres` (maintenance) database."""
    external = os.environ.get("MCP_MEMORY_TEST_DSN")
    if external:
        yield make_conninfo(external, dbname="postgres")
        return
    with embedded_home() as home:
        pgdir = home / "pg"
        uri = embedded.ensure_running(pgdir, allow_root=bool(ROOT_OPT_IN))
        try:
            yield make_conninfo(uri, dbname="postgres")
        finally:
            embedded.stop(pgdir)


@pytest.fixture(scope="session")
def template_db(admin_dsn: str) -> Iterator[str]:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}"')
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    migrate.migrate(make_conninfo(admin_dsn, dbname=TEMPLATE))
    try:
        yield TEMPLATE
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')


@contextmanager
def scratch_database(admin_dsn: str, prefix: str, template: str | None = None) -> Iterator[str]:
    """DSN of a new database (a clone of `template`, or empty), dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    clause = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{clause}')
    try:
        yield make_conninfo(admin_dsn, dbname=name)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def fresh_db(admin_dsn: str, template_db: str) -> Iterator[str]:
    """DSN of a new, migrated database for this test only."""
    with scratch_database(admin_dsn, "mm_test", template_db) as dsn:
        yield dsn


@pytest.fixture
def empty_db(admin_dsn: str) -> Iterator[str]:
    """DSN of a new database with no schema at all."""
    with scratch_database(admin_dsn, "mm_empty") as dsn:
        yield dsn


@pytest.fixture
def profile(tmp_path: Path) -> dict[str, str]:
    """An isolated environment: MCP_MEMORY_HOME in tmp, no DSN or config from the machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")}
    env["MCP_MEMORY_HOME"] = str(tmp_path / "home")
    env.update(ROOT_OPT_IN)
    return env


@pytest.fixture
def settings(fresh_db: str, profile: dict[str, str]) -> Settings:
    return replace(load_settings(dsn=fresh_db, environ=profile), pool_max=8)


@pytest.fixture
def service(settings: Settings) -> Iterator[Service]:
    svc = build(settings)
    try:
        yield svc
    finally:
        svc.db.close()
