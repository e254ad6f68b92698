"""`token create` prints the host's DSN in the one form the admin guide shows
(`postgresql://<role>@<host>/<db>`, no password), whichever form the owner's DSN had, and that
form connects as the role with the token and is what `login` records."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from security_support import ROLE_PREFIX

from mcp_memory.commands.security import uri_dsn

pytest_plugins = ["security_support"]
GUIDE = Path(__file__).resolve().parents[3] / "install" / "README.md"
# the form the guide gives for what `token create` prints
DOC_FORM = re.compile(r"`token create` prints the token \*\*once\*\*, and the DSN the host uses \(`([^`]+)`")


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", *args], check=False, capture_output=True,
                          text=True, env=env, timeout=120)


def _shape(dsn: str) -> tuple[str, str, bool]:
    """scheme, user and whether a password is in it: what the docs and the output must share."""
    match = re.match(r"^(postgresql)://([^:@/]+)(:[^@/]*)?@", dsn)
    assert match, f"not in the documented URI form: {dsn}"
    return match.group(1), match.group(2), match.group(3) is not None


@pytest.fixture
def roles(admin_dsn: str):
    names: list[str] = []
    yield names
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        for name in names:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def test_printed_dsn_is_the_documented_form(fresh_db: str, password_server: str, profile: dict[str, str],
                                            tmp_path: Path, roles: list[str]) -> None:
    documented = DOC_FORM.search(GUIDE.read_text())
    assert documented, "install/README.md no longer says which DSN `token create` prints"
    doc_scheme, doc_user, doc_password = _shape(documented.group(1))
    assert (doc_scheme, doc_user, doc_password) == ("postgresql", "host-a", False)

    assert not fresh_db.startswith("postgresql://")  # the owner's DSN is key=value here: the output converts
    admin = {**profile, "MCP_MEMORY_DSN": fresh_db}
    name = f"{ROLE_PREFIX}dsn_{uuid.uuid4().hex[:8]}"
    roles.append(name)
    made = _cli("token", "create", "--name", name, "--project", "web", "--json", env=admin)
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert _shape(created["dsn"]) == ("postgresql", name, False)
    expected = {**conninfo_to_dict(fresh_db), "user": name}
    expected.pop("password", None)
    assert conninfo_to_dict(created["dsn"]) == expected  # same server, database and options

    text_name = f"{ROLE_PREFIX}dsn_{uuid.uuid4().hex[:8]}"
    roles.append(text_name)
    text = _cli("token", "create", "--name", text_name, "--project", "web", env=admin)
    assert text.returncode == 0, text.stderr
    printed = re.search(r"mcp-memory login --dsn '([^']+)'", text.stdout)
    assert printed and printed.group(1) == created["dsn"].replace(name, text_name)

    with psycopg.connect(created["dsn"], password=created["token"], connect_timeout=10) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (name,)
    host = {**profile, "MCP_MEMORY_HOME": str(tmp_path / "host"),
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    logged = subprocess.run([sys.executable, "-m", "mcp_memory", "login", "--dsn", created["dsn"], "--token-stdin"],
                            input=created["token"] + "\n", capture_output=True, text=True, env=host, timeout=120)
    assert logged.returncode == 0, logged.stderr
    assert f'dsn = "{created["dsn"]}"' in (tmp_path / "host" / "mcp-memory" / "config.toml").read_text()


@pytest.mark.parametrize(("given", "wanted"), [
    ("host=db.example port=5432 dbname=mcp_memory user=host-a sslmode=require",
     "postgresql://host-a@db.example:5432/mcp_memory?sslmode=require"),
    ("user=host-a host=/run/postgresql dbname=mcp_memory", "postgresql://host-a@/mcp_memory?host=%2Frun%2Fpostgresql"),
    ("host=::1 dbname=m user=r", "postgresql://r@[::1]/m"),
    ("postgres://r@db/m", "postgresql://r@db/m"),
    ("postgresql://r@db:6432/m?sslmode=require", "postgresql://r@db:6432/m?sslmode=require"),
])
def test_uri_form_keeps_every_setting(given: str, wanted: str) -> None:
    assert uri_dsn(given) == wanted
    assert conninfo_to_dict(uri_dsn(given)) == conninfo_to_dict(given)
