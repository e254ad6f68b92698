"""Filters composed per combination: only the conditions of the filters a call gives.

A catch-all `(%(x)s IS NULL OR col = %(x)s)` keeps one statement for every combination, but a
plan made without the value (a generic plan, a partitioned table) can neither use an index for
the column nor prune a partition by it. Each hot query is instead a template with `{slot}`s,
filled here with psycopg.sql: the condition texts are constants of the code (with `%(name)s`
placeholders), the values stay parameters; nothing given by a caller is ever pasted into SQL.
"""

from __future__ import annotations

from collections.abc import Iterable

from psycopg import sql

from .sql import q

# (the filter is given, its SQL condition with %(name)s placeholders, or conditions composed before)
Condition = tuple[bool, "str | sql.Composable"]


def conditions(chosen: Iterable[Condition], *, joiner: str = " AND ") -> sql.Composable:
    """The given conditions joined (TRUE when none is); each in parentheses when more than one."""
    parts = [sql.SQL(text) if isinstance(text, str) else text for given, text in chosen if given]
    if not parts:
        return sql.SQL("TRUE")
    if len(parts) == 1:
        return parts[0]
    return sql.SQL(joiner).join(sql.SQL("({})").format(part) for part in parts)


def composed(name: str, **slots: sql.Composable) -> sql.Composed:
    """The named query (queries/*.sql) with its `{slot}`s filled."""
    return sql.SQL(q(name)).format(**slots)  # the text: a constant of the package


def project_only(column: str, project_id: str | None) -> sql.Composable:
    """The common case of one optional project filter on `column` (a constant name)."""
    return conditions([(project_id is not None, f"{column} = %(project_id)s")])
