"""Admin and host commands end to end: `token create --json | list | revoke`, `login` (keyring or the
0600 fallback file, DSN recorded in the config), later commands using the stored login, pgbouncer."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import keyring
import psycopg
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail
from psycopg import sql
from security_support import ROLE_PREFIX

from mcp_memory.config import load_settings
from mcp_memory.credentials import keyring_account, store_password, with_password
from mcp_memory.errors import Forbidden, Invalid
from mcp_memory.security.login import login, normalise_dsn
from mcp_memory.store.db import Database

NO_KEYRING = "keyring.backends.fail.Keyring"

pytest_plugins = ["security_support"]


def cli(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", *args], input=stdin, check=False, capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture
def drop_roles(admin_dsn: str):
    names: list[str] = []
    yield names
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        for name in names:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def test_admin_and_host_walkthrough(fresh_db: str, password_server: str, profile: dict[str, str],
                                    tmp_path: Path, drop_roles: list[str]) -> None:
    name = f"{ROLE_PREFIX}cli_{uuid.uuid4().hex[:8]}"
    drop_roles.append(name)
    admin = {**profile, "MCP_MEMORY_DSN": fresh_db}
    made = cli("token", "create", "--name", name, "--project", "web", "--json", env=admin)
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert set(created) == {"name", "role", "token", "dsn"} and created["role"] == name
    assert created["token"] not in created["dsn"]
    listed = json.loads(cli("token", "list", "--json", env=admin).stdout)["tokens"]
    assert [(t["role"], t["projects"], t["read_only"]) for t in listed] == [(name, ["web"], False)]
    assert cli("token", "create", "--name", name, "--project", "web", env=admin).returncode == 1  # exists

    host = {**profile, "MCP_MEMORY_HOME": str(tmp_path / "host"), "PYTHON_KEYRING_BACKEND": NO_KEYRING}
    logged = cli("login", "--dsn", created["dsn"], "--token-stdin", env=host, stdin=created["token"] + "\n")
    assert logged.returncode == 0, logged.stderr
    assert "0600" in logged.stdout and "web" in logged.stdout
    credentials = tmp_path / "host" / "mcp-memory" / "credentials.json"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    config = (tmp_path / "host" / "mcp-memory" / "config.toml").read_text()
    assert created["dsn"] in config and created["token"] not in config

    # later commands use the stored DSN and token: this host sees project web only
    new = cli("sessions", "--json", env=host)
    assert new.returncode == 0, new.stderr
    denied = cli("snapshot", "ses_00000000-0000-4000-8000-000000000000", env=host)
    assert denied.returncode == 1 and "[not_found]" in denied.stderr

    revoked = cli("token", "revoke", name, env=admin)
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    assert cli("sessions", env=host).returncode == 1


def test_login_refuses_a_wrong_token_and_stores_nothing(make_token, settings, tmp_path: Path) -> None:
    created = make_token("wrong", ["A"])
    host = replace(settings, config_dir=tmp_path, config_path=None)
    with pytest.raises(Forbidden):
        login(host, dsn=created.dsn, token=created.token[:-1] + ("A" if created.token[-1] != "A" else "B"))
    assert not (tmp_path / "credentials.json").exists() and not (tmp_path / "config.toml").exists()


class MemoryKeyring(KeyringBackend):
    priority = 1

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.items.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.items[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.items.pop((service, username), None)


def test_login_uses_the_os_keyring_when_there_is_one(make_token, settings, tmp_path: Path) -> None:
    created = make_token("kr", ["A"])
    previous = keyring.get_keyring()
    memory = MemoryKeyring()
    keyring.set_keyring(memory)
    try:
        host = replace(settings, config_dir=tmp_path, config_path=None)
        result = login(host, dsn=created.dsn, token=created.token, pgbouncer=True)
        assert result.fallback_file is None
        assert memory.items[("mcp-memory", keyring_account(created.dsn))] == created.token
        assert with_password(created.dsn, None) != created.dsn  # the keyring supplies the token
        loaded = load_settings(environ={"MCP_MEMORY_HOME": str(tmp_path.parent), "MCP_MEMORY_CONFIG":
                                        str(tmp_path / "config.toml")})
        assert loaded.dsn == created.dsn and loaded.pgbouncer is True
    finally:
        keyring.set_keyring(previous)


def test_fallback_file_and_dsn_checks(tmp_path: Path) -> None:
    dsn = "postgresql://host-a@db.example:5432/mem"
    path = tmp_path / "c" / "credentials.json"
    path.parent.mkdir()
    path.write_text("{}")
    path.chmod(0o644)
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        assert store_password(dsn, "tok-1", fallback=path) == path
        assert "tok-1" in with_password(dsn, None, fallback_file=path)
    finally:
        keyring.set_keyring(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = "mmt.host-a." + "a" * 43
    assert normalise_dsn("postgresql://db.example/mem", token) == "postgresql://host-a@db.example/mem"
    with pytest.raises(Invalid, match="belongs to role"):
        normalise_dsn("postgresql://host-b@db.example/mem", token)


def test_pgbouncer_setting_disables_prepared_statements(settings) -> None:
    db = Database(replace(settings, pgbouncer=True))
    try:
        with db.connect() as conn:
            assert conn.prepare_threshold is None
        with db.transaction() as conn:
            assert conn.prepare_threshold is None
    finally:
        db.close()
    assert Database(settings)._pooler_options() == {}
