"""Per-token rate limit: a token bucket per role (`[http] rate_limit` requests/second, `burst`)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class RateLimiter:
    """`take(key)` returns 0 when the request may go, else the seconds to wait (Retry-After)."""

    def __init__(self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, last refill)
        self._lock = threading.Lock()

    def take(self, key: str) -> int:
        if self.rate <= 0:
            return 0
        with self._lock:
            now = self.clock()
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return 0
            self._buckets[key] = (tokens, now)
            return max(1, math.ceil((1 - tokens) / self.rate))
