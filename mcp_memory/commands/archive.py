"""Command group 'archive' — sub-commands are registered here (add_parsers) with their handlers."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def add_parsers(sub: argparse._SubParsersAction) -> None:
    return None


def handlers() -> dict[str, Callable[..., int]]:
    return {}
