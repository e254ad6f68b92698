"""The composition root: one function builds database + service for every entry point."""

from __future__ import annotations

import os
from collections.abc import Mapping

from .config import Settings, load_settings
from .core.sanitize import Cleaner
from .core.service import Service
from .store.db import Database


def build(
    settings: Settings | None = None, *, dsn: str | None = None, environ: Mapping[str, str] | None = None,
    application_name: str = "mcp-memory",
) -> Service:
    settings = settings or load_settings(dsn=dsn, environ=os.environ if environ is None else environ)
    db = Database(settings, application_name=application_name)
    return Service(db, cleaner=Cleaner())
