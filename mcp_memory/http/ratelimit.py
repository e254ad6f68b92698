"""Rate limits: a token bucket per key (`rate` requests/second, `burst`), in a bounded map.

Keys are verified roles (`[http] rate_limit`, `burst`: charged only after the token was verified)
or, for failed authentications, (client address, claimed role) and client addresses
(`[http] auth_failures_per_second`, `auth_failure_burst`; the Gate in app.py). The map holds at most
`max_keys` buckets, least recently used out, so a flood of new keys costs no memory.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable


class RateLimiter:
    """`take(key)` returns 0 when the request may go, else the seconds to wait (Retry-After)."""

    def __init__(self, rate: float, burst: int, *, max_keys: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self.max_keys = max(1, max_keys)
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, last refill)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: str) -> int:
        return self._charge(key, consume=True)

    def blocked(self, key: str) -> int:
        """Like `take` without spending: the wait when `key` has nothing left, else 0."""
        return self._charge(key, consume=False)

    def _charge(self, key: str, *, consume: bool) -> int:
        if self.rate <= 0:
            return 0
        with self._lock:
            now = self.clock()
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            wait = 0 if tokens >= 1 else max(1, math.ceil((1 - tokens) / self.rate))
            if consume and not wait:
                tokens -= 1
            if consume or key in self._buckets:
                self._buckets[key] = (tokens, now)
                self._buckets.move_to_end(key)
                while len(self._buckets) > self.max_keys:
                    self._buckets.popitem(last=False)
            return wait
