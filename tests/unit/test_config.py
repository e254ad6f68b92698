"""Configuration resolution (README, Configuration) and secret masking."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_memory.config import load_settings
from mcp_memory.credentials import mask_dsn, with_password
from mcp_memory.errors import ConfigError, Invalid


def test_precedence_flag_env_file_embedded(tmp_path: Path) -> None:
    home = tmp_path / "h"
    (home / "mcp-memory").mkdir(parents=True)
    (home / "mcp-memory" / "config.toml").write_text('[database]\ndsn = "postgresql://file@h/db"\npool_max = 2\n')
    env = {"MCP_MEMORY_HOME": str(home)}
    assert load_settings(environ=env).dsn == "postgresql://file@h/db"
    assert load_settings(environ=env).dsn_source == "config" and load_settings(environ=env).pool_max == 2
    env["MCP_MEMORY_DSN"] = "postgresql://env@h/db"
    assert load_settings(environ=env).dsn == "postgresql://env@h/db"
    assert load_settings(dsn="postgresql://flag@h/db", environ=env).dsn_source == "flag"
    bare = load_settings(environ={"MCP_MEMORY_HOME": str(tmp_path / "other")})
    assert bare.embedded and bare.dsn_source == "embedded"
    assert bare.data_dir == (tmp_path / "other" / "mcp-memory").resolve()


def test_explicit_config_file_and_errors(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[limits]\nmax_message_bytes = 4096\n')
    settings = load_settings(environ={"MCP_MEMORY_CONFIG": str(cfg), "MCP_MEMORY_HOME": str(tmp_path)})
    assert settings.max_message_bytes == 4096 and settings.config_path == cfg
    with pytest.raises(ConfigError, match="not a file"):
        load_settings(environ={"MCP_MEMORY_CONFIG": str(tmp_path / "missing.toml")})
    cfg.write_text("[database\n")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(environ={"MCP_MEMORY_CONFIG": str(cfg)})
    cfg.write_text("[database]\npool_max = 0\n")
    with pytest.raises(ConfigError, match="pool_max must be an integer"):
        load_settings(environ={"MCP_MEMORY_CONFIG": str(cfg)})


def test_example_config_parses() -> None:
    example = Path(__file__).resolve().parents[2] / "config" / "mcp-memory.example.toml"
    settings = load_settings(environ={"MCP_MEMORY_CONFIG": str(example)})
    assert settings.dsn_source == "config"


@pytest.mark.parametrize(
    ("dsn", "masked"),
    [
        ("postgresql://u:secret@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgres://u@h/db", "postgres://u@h/db"),
        ("host=h user=u password=secret dbname=d", "host=h user=u password=*** dbname=d"),
        ("host=h password='se cret' user=u", "host=h password=*** user=u"),
    ],
)
def test_mask_dsn(dsn: str, masked: str) -> None:
    assert mask_dsn(dsn) == masked


def test_password_from_env_is_added_but_never_overrides() -> None:
    assert "password=pw" in with_password("host=h user=u dbname=d", "pw")
    assert with_password("postgresql://u:own@h/d", "pw") == "postgresql://u:own@h/d"


def test_read_dsn_one_or_a_list_env_first_and_checked(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    env = {"MCP_MEMORY_CONFIG": str(cfg), "MCP_MEMORY_HOME": str(tmp_path)}
    cfg.write_text('[database]\ndsn = "postgresql://p@h/db"\nread_dsn = "postgresql://r@s1/db"\n')
    settings = load_settings(environ=env)
    assert settings.read_dsns == ("postgresql://r@s1/db",) and settings.max_replica_lag == 1.0
    cfg.write_text('[database]\ndsn = "postgresql://p@h/db"\nmax_replica_lag = 0.25\n'
                   'read_dsn = ["postgresql://r@s1/db", "host=s2 dbname=db"]\n')
    settings = load_settings(environ=env)
    assert settings.read_dsns == ("postgresql://r@s1/db", "host=s2 dbname=db") and settings.max_replica_lag == 0.25
    assert load_settings(environ={**env, "MCP_MEMORY_READ_DSN": "host=s3"}).read_dsns == ("host=s3",)
    cfg.write_text('[database]\ndsn = "postgresql://p@h/db"\nread_dsn = ["postgresql://r@s1/db", 5]\n')
    with pytest.raises(Invalid, match=r"\[database\] read_dsn\[1\] must be a PostgreSQL connection string"):
        load_settings(environ=env)
    cfg.write_text('[database]\ndsn = "postgresql://p@h/db"\nread_dsn = "not a dsn"\n')
    with pytest.raises(Invalid, match=r"\[database\] read_dsn is not a PostgreSQL connection string"):
        load_settings(environ=env)
    cfg.write_text('[database]\ndsn = "postgresql://p@h/db"\nmax_replica_lag = -1\n')
    with pytest.raises(ConfigError, match="max_replica_lag must be a number of seconds"):
        load_settings(environ=env)
    cfg.write_text('[database]\nread_dsn = "postgresql://r@s1/db"\n')
    with pytest.raises(ConfigError, match=r"read_dsn needs \[database\] dsn"):
        load_settings(environ=env)


def test_database_gateway_is_a_boolean(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[database]\ndsn = "postgresql://h@pooler:6432/m"\npgbouncer = true\ngateway = true\n')
    assert load_settings(environ={"MCP_MEMORY_CONFIG": str(path)}).gateway is True
    path.write_text('[database]\ngateway = "yes"\n')
    with pytest.raises(ConfigError, match="gateway must be true or false"):
        load_settings(environ={"MCP_MEMORY_CONFIG": str(path)})
    assert load_settings(environ={"MCP_MEMORY_HOME": str(tmp_path / "home")}).gateway is False
