"""Shared helpers for CLI commands: one service per command, JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..config import Settings

if TYPE_CHECKING:  # the CLI builds every sub-command's parser: none may import the core (psycopg) early
    from ..core.service import Service


@contextmanager
def service(settings: Settings) -> Iterator[Service]:
    from ..wiring import build

    svc = build(settings, application_name="mcp-memory cli")
    try:
        yield svc
    finally:
        svc.db.close()


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    return value


def print_json(value: Any) -> None:
    json.dump(to_jsonable(value), sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def progress(done: int, total: int, label: str) -> None:
    """A one-line progress bar on stderr (only when stderr is a terminal)."""
    if not sys.stderr.isatty() or total <= 1:
        return
    width = 30
    filled = int(width * done / total)
    sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()
