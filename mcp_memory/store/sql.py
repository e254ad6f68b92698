"""Named queries, kept in `.sql` files (`-- name: query_name` then the statement)."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


@cache
def queries() -> dict[str, str]:
    found: dict[str, str] = {}
    for entry in sorted(resources.files(__package__).joinpath("queries").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        chunks = _HEADER.split(entry.read_text(encoding="utf-8"))
        for name, body in zip(chunks[1::2], chunks[2::2], strict=True):
            if name in found:
                raise RuntimeError(f"query {name} is defined twice")
            found[name] = body.strip().rstrip(";")
    return found


def q(name: str) -> str:
    return queries()[name]
