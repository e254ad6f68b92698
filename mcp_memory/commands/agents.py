"""Agent commands (import, export, sync, install) — registered in the CLI parser."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def add_parsers(sub: argparse._SubParsersAction) -> None:
    return None


def handlers() -> dict[str, Callable[..., int]]:
    return {}
