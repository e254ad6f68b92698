"""A title for every hop of a relay or fork. A session continued in another agent, or forked, usually
carries its source's title (the import copies the native session's first words, a fork copies the
meta), so every hop would read the same; a hop that has no title of its own is named after the
title it inherits, its agent and its place in the chain: "Fix payments — codex (hop 2)"."""

from __future__ import annotations

from typing import Any

from ..store import ui_store
from ..store.db import Database


def hop_title(title: str | None, agent: str | None, hops: int, parent_title: str | None) -> str | None:
    """`hops`: readable ancestors (0 for a root, which keeps its own title or none)."""
    if hops <= 0 or (title and title != parent_title):
        return title
    base = title or parent_title or "untitled"
    return f"{base} — {agent or 'unknown agent'} (hop {hops + 1})"


def titles(db: Database, session_ids: list[str]) -> dict[str, str]:
    """session id → the title to show for it (sessions without any title are left out)."""
    found: dict[str, str] = {}
    for sid, row in ui_store.hops(db, [s for s in session_ids if s]).items():
        title = hop_title(row["title"], row["agent_source"], int(row["depth"]), row["parent_title"])
        if title:
            found[sid] = title
    return found


def ids(rows: list[Any], *fields: str) -> list[str]:
    """The session ids found in these rows (dicts or models) under these fields."""
    found = []
    for row in rows:
        for name in fields:
            value = row.get(name) if isinstance(row, dict) else getattr(row, name, None)
            if isinstance(value, str):
                found.append(value)
    return found
