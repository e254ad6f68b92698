"""The composition root: one function builds database + service for every entry point."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

from .config import Settings, load_settings
from .core.sanitize import Cleaner
from .core.service import Service
from .core.transfers import Local
from .credentials import keyring_secret
from .embeddings.providers import Provider, build_provider, parse_config
from .security.redact import from_config
from .store.db import Database

APPLICATION_NAME_MAX = 63  # PostgreSQL truncates application_name to NAMEDATALEN - 1 bytes


def host_application_name(purpose: str = "mcp-memory") -> str:
    """`<purpose>@<host>`: the connection's application_name, shown in pg_stat_activity and by
    `token list`. Client-chosen, so nothing stored trusts it: the audit column is written_by (the role)."""
    name = f"{purpose}@{socket.gethostname()}"
    return name.encode()[:APPLICATION_NAME_MAX].decode(errors="ignore")


def build_cleaner(settings: Settings) -> Cleaner:
    """The payload cleaner with the redactor of the `[redaction]` config section."""
    return Cleaner(from_config(settings.raw.get("redaction")))


def build(
    settings: Settings | None = None, *, dsn: str | None = None, environ: Mapping[str, str] | None = None,
    application_name: str = "mcp-memory", local: bool = True,
) -> Service:
    """`local`: the service answers a caller on this machine (CLI, stdio, library), so import and
    export may use its files; serve-http builds its services without (core/transfers.py)."""
    environ = os.environ if environ is None else environ
    settings = settings or load_settings(dsn=dsn, environ=environ)
    name = application_name if "@" in application_name else host_application_name(application_name)
    db = Database(settings, application_name=name)
    return Service(db, cleaner=build_cleaner(settings), embedder=build_embedder(settings),
                   local=Local(environ=environ, cwd=Path.cwd()) if local else None)


def build_embedder(settings: Settings) -> Provider | None:
    """The provider of the `[embeddings]` section (key: MCP_MEMORY_EMBEDDINGS_KEY, else the keyring
    account `embeddings:<url>`), or None. Building it loads no model and calls no service."""
    section = settings.embeddings
    key = settings.embeddings_key
    if key is None and section.get("url"):
        key = keyring_secret(f"embeddings:{section['url']}")
    config = parse_config(section, key)
    return build_provider(config) if config else None
