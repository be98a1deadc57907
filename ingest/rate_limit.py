"""Per-source rate limiting of ingest (optional; off by default).

One token bucket per tenant and source name: the `tenant` and `source` of a `POST
/v1/events` body (the default tenant and `api` when it has none), and the `{name}` of `POST
/v1/sources/{name}` (the default tenant's). So one tenant's flood of events never spends
another tenant's tokens, whatever source names they share. A bucket holds at most `burst`
tokens and refills at `rate_per_s` tokens per second, continuously; each event takes one.
An event finding its bucket empty is answered 429 `rate_limited` with `Retry-After` (whole
seconds until a token is back, at least 1), before anything is stored.

The check runs after the request is validated (or its signature verified), so malformed or
forged requests never spend a real sender's tokens. Buckets live in this process's memory:
with several ingest processes, each enforces the limit on its own share of the traffic.
At most `max_sources` buckets are kept; past that the least recently used one is dropped
(that source starts again with a full bucket), so a flood of made-up source names cannot
grow memory without bound.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

from hookline.shared.config import Config
from hookline.shared.models import DEFAULT_TENANT

MAX_SOURCES = 10_000
"""Most buckets kept at once (least recently used dropped first)."""


class SourceRateLimiter:
    """Token buckets by source name.

    Args:
        rate_per_s: tokens (events) added per second to each bucket; 0 turns limiting off.
        burst: largest number of tokens a bucket holds (events accepted at once), >= 1.
        clock: monotonic seconds; tests pass their own.
        max_sources: most buckets kept (see the module docstring).

    Raises:
        ValueError: `rate_per_s` is negative or not finite, or `burst` is below 1.
    """

    def __init__(self, rate_per_s: float, burst: int, *,
                 clock: Callable[[], float] = time.monotonic,
                 max_sources: int = MAX_SOURCES) -> None:
        if not 0 <= rate_per_s < math.inf:
            raise ValueError(f"rate_per_s must be a finite number >= 0, not {rate_per_s}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, not {burst}")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._clock = clock
        self._max_sources = max_sources
        # (tenant, source) -> (tokens, when counted)
        self._buckets: OrderedDict[tuple[str, str], tuple[float, float]] = OrderedDict()

    @classmethod
    def from_config(cls, config: Config) -> SourceRateLimiter:
        """The limiter `config.ingest_rate_per_s` and `config.ingest_burst` describe."""
        return cls(config.ingest_rate_per_s, config.ingest_burst)

    @property
    def enabled(self) -> bool:
        """False when the rate is 0 (every :meth:`take` succeeds)."""
        return self.rate_per_s > 0

    def take(self, source: str, tenant: str = DEFAULT_TENANT) -> float | None:
        """Spend one token of `tenant`'s bucket for `source`.

        Args:
            source: the source name.
            tenant: the tenant the event is for (each tenant's sources have buckets of
                their own).

        Returns:
            None when the event may proceed; else how long until a token is back, seconds
            (nothing is spent then).
        """
        if not self.enabled:
            return None
        now = self._clock()
        key = (tenant, source)
        tokens, at = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate_per_s)
        if tokens >= 1.0:
            tokens -= 1.0
            wait = None
        else:
            wait = (1.0 - tokens) / self.rate_per_s
        if len(self._buckets) >= self._max_sources:
            self._buckets.popitem(last=False)  # least recently used
        self._buckets[key] = (tokens, now)
        return wait


def retry_after_s(wait_s: float) -> int:
    """A `Retry-After` value for a wait of `wait_s` seconds: whole seconds, at least 1."""
    return max(1, math.ceil(wait_s))
