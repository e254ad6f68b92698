"""The statements of retention to cold storage (archive/cold.py, migration 0024): the owner's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from .sql import Statements, q


@dataclass(frozen=True)
class MonthSession:
    session_id: str
    project_id: str
    fork_seq: int
    last_seq: int


@dataclass(frozen=True)
class RetiredMonth:
    dropped: bool
    archive_commit: str | None


class ColdStore(Statements):
    def month_sessions(self, month: date, *, lock: bool = False) -> list[MonthSession]:
        rows = self._all("cold_month_sessions_locked" if lock else "cold_month_sessions", {"month": month})
        return [MonthSession(**row) for row in rows]

    def record_commit(self, month: date, commit: str) -> None:
        self.conn.execute(q("cold_record_commit"), {"month": month, "commit": commit})

    def retired(self, month: date) -> RetiredMonth | None:
        row = self._one("cold_retired_month", {"month": month})
        return RetiredMonth(**row) if row else None

    def restore_month(self, month: date) -> list[tuple[str, bool]]:
        """The month's partitions attached again or created empty (mm_restore_month): (name, attached)."""
        return [(row["part"], row["attached"]) for row in self._all("cold_restore_month", {"month": month})]
