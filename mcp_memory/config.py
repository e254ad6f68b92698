"""Configuration, resolved in one place (README, Configuration).

Database: `--dsn` > env `MCP_MEMORY_DSN` > config file > the embedded default.
Read replicas: env `MCP_MEMORY_READ_DSN` (one DSN) > `[database] read_dsn` (one DSN or a list).
Config file: env `MCP_MEMORY_CONFIG`, else `<user config dir>/mcp-memory/config.toml`.
`MCP_MEMORY_HOME` replaces both the user config dir and the user data dir.
Nothing else in the package reads environment variables for its own settings.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .credentials import mask_dsn
from .errors import ConfigError, Invalid
from .schema import DEFAULT_MAX_MESSAGE_BYTES

if TYPE_CHECKING:  # tomlkit only edits the file (login, projects map): serve never loads it
    import tomlkit

APP = "mcp-memory"
KEYRING_SERVICE = "mcp-memory"

DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024  # as REST's http.max_body_bytes

DsnSource = Literal["flag", "env", "config", "embedded"]


@dataclass(frozen=True)
class Settings:
    dsn: str | None  # None: use the embedded server
    dsn_source: DsnSource
    config_dir: Path
    data_dir: Path
    config_path: Path | None  # the file that was read, if any
    pool_min: int = 1
    pool_max: int = 4
    connect_timeout: float = 5.0
    statement_timeout: float = 5.0  # seconds, enforced by the server per statement (0: none)
    lock_timeout: float = 5.0  # seconds a statement waits for a lock (0: none)
    call_timeout: float = 8.0  # seconds one call may take before the client cuts it off (0: none)
    auto_migrate: bool = True
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # [limits]: one stdio request, refused before parsing
    password: str | None = None  # from env or keyring, never logged
    archive: dict[str, Any] = field(default_factory=dict)
    embedded_as_root: bool = False  # start the embedded server when running as root (explicit opt-in)
    pgbouncer: bool = False  # [database] pgbouncer: no prepared statements (transaction pooling)
    direct_dsn: str | None = None  # [database] direct_dsn: LISTEN and session-level locks bypass the pooler
    read_dsns: tuple[str, ...] = ()  # [database] read_dsn: standbys for reads (store/replicas.py)
    max_replica_lag: float = 1.0  # [database] max_replica_lag: seconds; a standby further behind is skipped
    gateway: bool = False  # [database] gateway: each transaction proves the token (mm_enter, 0020/0026)
    raw: dict[str, Any] = field(default_factory=dict)  # whole config file, for later sections
    embeddings: dict[str, Any] = field(default_factory=dict)  # [embeddings]: semantic search provider
    embeddings_key: str | None = None  # API key of the embedding service (env), never logged

    @property
    def embedded(self) -> bool:
        return self.dsn is None

    @property
    def embedded_dir(self) -> Path:
        return self.data_dir / "pg"

    @property
    def credentials_file(self) -> Path:
        """Where `mcp-memory login` keeps tokens when no OS keyring backend exists (mode 0600)."""
        return self.config_dir / "credentials.json"

    @property
    def write_config_path(self) -> Path:
        """The config file that `mcp-memory login` updates: the one in use, else the default place."""
        return self.config_path or self.config_dir / "config.toml"

    def describe_dsn(self) -> str:
        return "embedded" if self.dsn is None else mask_dsn(self.dsn)


def user_dirs(environ: Mapping[str, str]) -> tuple[Path, Path]:
    """(config dir, data dir) for this profile."""
    home = environ.get("MCP_MEMORY_HOME")
    if home:
        base = Path(home).expanduser().resolve() / APP
        return base, base
    import platformdirs

    return (
        Path(platformdirs.user_config_dir(APP, appauthor=False)),
        Path(platformdirs.user_data_dir(APP, appauthor=False)),
    )


def load_settings(*, dsn: str | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    config_dir, data_dir = user_dirs(environ)
    config_path = _config_path(environ, config_dir)
    raw = _read_config(config_path) if config_path else {}
    database = _section(raw, "database")
    limits = _section(raw, "limits")

    source: DsnSource
    if dsn:
        source = "flag"
        check_dsn(dsn, "--dsn")
    elif environ.get("MCP_MEMORY_DSN"):
        dsn, source = check_dsn(environ["MCP_MEMORY_DSN"], "MCP_MEMORY_DSN"), "env"
    elif database.get("dsn"):
        dsn, source = check_dsn(database["dsn"], f"[database] dsn of {config_path}"), "config"
    else:
        dsn, source = None, "embedded"

    return Settings(
        dsn=dsn,
        dsn_source=source,
        config_dir=config_dir,
        data_dir=data_dir,
        config_path=config_path,
        pool_min=_int(database, "pool_min", 1, minimum=0),
        pool_max=_int(database, "pool_max", 4, minimum=1),
        connect_timeout=_seconds(database, "connect_timeout", 5.0),
        statement_timeout=_seconds(database, "statement_timeout", 5.0),
        lock_timeout=_seconds(database, "lock_timeout", 5.0),
        call_timeout=_seconds(database, "call_timeout", 8.0),
        auto_migrate=bool(database.get("auto_migrate", True)),
        max_message_bytes=_int(limits, "max_message_bytes", DEFAULT_MAX_MESSAGE_BYTES, minimum=1024),
        max_request_bytes=_int(limits, "max_request_bytes", DEFAULT_MAX_REQUEST_BYTES, minimum=1024),
        password=environ.get("MCP_MEMORY_PASSWORD") or None,
        archive=_section(raw, "archive"),
        pgbouncer=_bool(database, "pgbouncer", False),
        direct_dsn=_direct_dsn(database),
        read_dsns=_read_dsns(database, environ, embedded=dsn is None),
        max_replica_lag=_seconds(database, "max_replica_lag", 1.0),
        gateway=_bool(database, "gateway", False),
        embedded_as_root=environ.get("MCP_MEMORY_EMBEDDED_AS_ROOT", "") in ("1", "true", "yes")
        or _bool(database, "embedded_as_root", False),
        raw=raw,
        embeddings=_section(raw, "embeddings"),
        embeddings_key=environ.get("MCP_MEMORY_EMBEDDINGS_KEY") or None,
    )


def _direct_dsn(database: dict[str, Any]) -> str | None:
    value = database.get("direct_dsn")
    if value is None or value == "":
        return None
    return check_dsn(value, "[database] direct_dsn")


def _read_dsns(database: dict[str, Any], environ: Mapping[str, str], *, embedded: bool) -> tuple[str, ...]:
    """The standbys that serve reads: env MCP_MEMORY_READ_DSN (one DSN; a multi-host DSN is libpq's
    own list), else `[database] read_dsn` (a DSN or a list of DSNs). The embedded server has none."""
    if environ.get("MCP_MEMORY_READ_DSN"):
        found: tuple[str, ...] = (check_dsn(environ["MCP_MEMORY_READ_DSN"], "MCP_MEMORY_READ_DSN"),)
    else:
        value = database.get("read_dsn")
        if value is None or value == "" or value == []:
            return ()
        items = value if isinstance(value, list) else [value]
        found = tuple(check_dsn(item, f"[database] read_dsn[{index}]" if isinstance(value, list)
                                else "[database] read_dsn") for index, item in enumerate(items))
    if embedded:
        raise ConfigError("config: [database] read_dsn needs [database] dsn (the primary): the embedded server "
                          "has no read replicas")
    return found


DSN_RULE = ("a PostgreSQL connection string: a URI (postgresql://user@host:5432/dbname) "
            "or key=value pairs (host=localhost port=5432 dbname=mcp_memory)")


def check_dsn(value: object, setting: str) -> str:
    """A DSN libpq can parse, else `[invalid]` naming the setting and the rule. The value itself is
    not quoted back: it may hold a password."""
    if not isinstance(value, str):
        raise Invalid(f"{setting} must be {DSN_RULE}, not a value of type {type(value).__name__}")
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(value)
    except ProgrammingError:
        raise Invalid(f"{setting} is not {DSN_RULE}") from None
    return value


def _config_path(environ: Mapping[str, str], config_dir: Path) -> Path | None:
    explicit = environ.get("MCP_MEMORY_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"MCP_MEMORY_CONFIG points to {path}, which is not a file")
        return path
    path = config_dir / "config.toml"
    return path if path.is_file() else None


def _read_config(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None


def _section(raw: dict[str, Any], name: str) -> dict[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"config: [{name}] must be a table")
    return value


def _int(section: dict[str, Any], key: str, default: int, *, minimum: int) -> int:
    value = section.get(key, default)
    if not isinstance(value, int) or value < minimum:
        raise ConfigError(f"config: {key} must be an integer ≥ {minimum}, got {value!r}")
    return value


def _seconds(section: dict[str, Any], key: str, default: float) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError(f"config: database.{key} must be a number of seconds ≥ 0, got {value!r}")
    return float(value)


def _bool(section: dict[str, Any], key: str, default: bool) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"config: {key} must be true or false, got {value!r}")
    return value


@contextmanager
def edited_config(path: Path) -> Iterator[tomlkit.TOMLDocument]:
    """The config file as an editable document (comments and order kept), written back when the
    block ends without an error (`login`, `projects map`)."""
    import tomlkit

    try:
        document = tomlkit.parse(path.read_text(encoding="utf-8")) if path.is_file() else tomlkit.document()
    except (OSError, tomlkit.exceptions.ParseError) as exc:
        raise ConfigError(f"cannot update {path}: {exc}") from None
    yield document
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(document), encoding="utf-8")
