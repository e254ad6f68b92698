"""Fixtures shared by the security tests (imported by test_rls*.py, test_rest*.py, test_security*.py).

Token tests need a server that checks passwords. The external PostgreSQL of CI (TCP, scram) does;
the embedded test server trusts its unix socket, so `password_server` adds a scram rule for the test
roles (`mmtest_…`, a regex rule: PostgreSQL ≥ 16) at the top of its pg_hba.conf, reloads, and puts
the file back afterwards. Roles are cluster-wide: each test names its roles uniquely and drops them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from mcp_memory.config import Settings
from mcp_memory.core.service import Service
from mcp_memory.security import tokens
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

ROLE_PREFIX = "mmtest_"
HBA_RULES = (f"local all /^{ROLE_PREFIX} scram-sha-256\n"
             f"host all /^{ROLE_PREFIX} 127.0.0.1/32 scram-sha-256\n")


def _password_checked(admin_dsn: str) -> bool:
    role = f"{ROLE_PREFIX}probe_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'right-password'").format(sql.Identifier(role)))
    try:
        psycopg.connect(make_conninfo(admin_dsn, user=role, password="wrong-password"), connect_timeout=5).close()
        return False
    except psycopg.OperationalError:
        return True
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.fixture(scope="session")
def password_server(admin_dsn: str) -> Iterator[str]:
    """The admin DSN of a server that verifies the test roles' passwords."""
    if _password_checked(admin_dsn):
        yield admin_dsn
        return
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        version = conn.info.server_version
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])
        if os.environ.get("MCP_MEMORY_TEST_DSN") or version < 160000 or not os.access(hba, os.W_OK):
            pytest.skip(f"the test server does not check passwords and its pg_hba.conf ({hba}) cannot be "
                        "changed here: token tests need password authentication")
        original = hba.read_text()
        hba.write_text(HBA_RULES + original)
        conn.execute("SELECT pg_reload_conf()")
    try:
        if not _password_checked(admin_dsn):
            pytest.skip("password authentication could not be enabled for the test roles")
        yield admin_dsn
    finally:
        hba.write_text(original)
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")


@pytest.fixture
def owner_db(settings: Settings, password_server: str) -> Database:
    """The fresh database seen by its owner (the superuser of the test server)."""
    return Database(settings, application_name="mcp-memory owner@test")


@pytest.fixture
def make_token(owner_db: Database, admin_dsn: str) -> Iterator[Callable[..., tokens.CreatedToken]]:
    """`make_token("a", ["P"], read_only=…, archiver=…)`: a token role named mmtest_<a>_<random>."""
    created: list[str] = []

    def make(label: str, projects: list[str] | None, **flags: bool) -> tokens.CreatedToken:
        name = f"{ROLE_PREFIX}{label}_{uuid.uuid4().hex[:8]}"
        created.append(name)
        return tokens.create(owner_db, name=name, projects=projects, **flags)

    try:
        yield make
    finally:
        owner_db.close()
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            for role in created:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def connect_as(created: tokens.CreatedToken, **kwargs: object) -> psycopg.Connection:
    """A raw connection as the token's role, the token as the password."""
    return psycopg.connect(created.dsn, password=created.token, connect_timeout=5, **kwargs)


def token_service(settings: Settings, created: tokens.CreatedToken) -> Service:
    """The core service as a host holding this token would run it."""
    return build(replace(settings, dsn=created.dsn, password=created.token, pool_min=0, pool_max=2,
                         auto_migrate=False), application_name="mcp-memory test")
