"""Retry strategy for export jobs: exponential backoff with jitter, and a limit on attempts.

Pure (no clock, no database): the caller passes the attempt number and, for tests, the random draw.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RetryStrategy:
    """Attempt n (1-based) waits base * factor**(n-1), capped at max_delay, then scaled by a random
    factor in [1 - jitter, 1]: failures of many jobs at once (a remote outage) spread out instead of
    hammering the remote together when it comes back."""

    max_attempts: int = 8
    base: float = 2.0
    factor: float = 2.0
    max_delay: float = 600.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base < 0 or self.factor < 1 or not 0 <= self.jitter <= 1:
            raise ValueError(f"invalid retry strategy {self}")

    def exhausted(self, attempts: int) -> bool:
        """True when a job that has failed `attempts` times must stop and become `failed`."""
        return attempts >= self.max_attempts

    def delay(self, attempt: int, *, draw: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based). `draw` in [0, 1) replaces
        the random draw (tests)."""
        if attempt < 1:
            raise ValueError("attempt numbers start at 1")
        raw = min(self.max_delay, self.base * self.factor ** min(attempt - 1, 64))
        u = random.random() if draw is None else draw
        return raw * (1 - self.jitter * u)

    @classmethod
    def from_config(cls, section: dict[str, Any]) -> RetryStrategy:
        return cls(
            max_attempts=int(section.get("max_attempts", cls.max_attempts)),
            base=float(section.get("retry_base", cls.base)),
            factor=float(section.get("retry_factor", cls.factor)),
            max_delay=float(section.get("retry_max_delay", cls.max_delay)),
            jitter=float(section.get("retry_jitter", cls.jitter)),
        )
