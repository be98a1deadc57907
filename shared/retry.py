"""Retry policy: pure decisions, no I/O (unit tested without sockets).

`classify` sorts one attempt's result into delivered / transient / permanent;
`next_attempt` turns that into an :data:`~shared.models.Outcome` for the store.

Backoff formula ("equal jitter"): the n-th wait (after attempt n) is
    d = min(cap_s, base_s * 2 ** (n - 1));  wait = d / 2 + uniform(0, d / 2)
so waits never shrink to zero (unlike full jitter) yet spread retries of many jobs apart.
With the defaults (base 10 s, cap 8 h, 18 attempts) the schedule spans 26 to 51 hours,
outlasting a day-long outage of the destination, like the leading senders' schedules.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

from shared.models import AttemptResult, Dead, Done, Outcome, Retry

# Statuses that mean "try later": request timeout, too early, rate limited (RFC 9110, 8470,
# 6585). Every 5xx is transient too.
TRANSIENT_STATUSES = frozenset({408, 425, 429})
# 4xx that mean the request will never succeed as is: dead at once instead of retrying.
DEFAULT_PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 405, 410, 413, 415, 422})


class Verdict(Enum):
    """How one attempt ended."""

    DELIVERED = "delivered"
    TRANSIENT = "transient"
    PERMANENT = "permanent"


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """Backoff settings, in seconds; see the module docstring for the formula."""

    base_s: float
    cap_s: float
    max_attempts: int

    def wait_bounds_s(self, attempt: int) -> tuple[float, float]:
        """(shortest, longest) wait after attempt number `attempt` (1-based)."""
        d = min(self.cap_s, self.base_s * 2.0 ** (attempt - 1))
        return d / 2, d

    def wait_s(self, attempt: int, rng: random.Random | None = None) -> float:
        """A jittered wait after attempt `attempt`, within :meth:`wait_bounds_s`."""
        low, high = self.wait_bounds_s(attempt)
        return low + (rng or random).uniform(0, high - low)


def classify(result: AttemptResult,
             permanent_statuses: frozenset[int] = DEFAULT_PERMANENT_STATUSES) -> Verdict:
    """Sort an attempt's result.

    2xx is delivered. No response (connection refused or reset, DNS or TLS failure, timeout,
    connection closed before a response) is transient, as are 408, 425, 429 and 5xx. 3xx is
    transient: redirects are never followed (a followed 302 turns a POST into a GET and would
    carry our signature to another host), the status and Location are recorded. Statuses in
    `permanent_statuses` are permanent; any other 4xx is transient.
    """
    code = result.status_code
    if code is None:
        return Verdict.TRANSIENT
    if 200 <= code < 300:
        return Verdict.DELIVERED
    if code in permanent_statuses:
        return Verdict.PERMANENT
    return Verdict.TRANSIENT


def describe_failure(result: AttemptResult) -> str:
    """A short last_error text: `HTTP 503`, `HTTP 302 -> https://…`, or the error class."""
    if result.status_code is None:
        return result.error or "no response"
    text = f"HTTP {result.status_code}"
    if result.location:
        text += f" -> {result.location[:200]}"
    return text


def next_attempt(attempt: int, result: AttemptResult, now_s: float, backoff: Backoff,
                 rng: random.Random | None = None,
                 permanent_statuses: frozenset[int] = DEFAULT_PERMANENT_STATUSES) -> Outcome:
    """Decide what happens to a job after attempt number `attempt` produced `result`.

    Args:
        attempt: 1-based number of the attempt just made (counted at claim).
        result: what happened on the wire.
        now_s: current unix time, seconds.
        backoff: the schedule and the attempt cap.

    Returns:
        Done on 2xx; Dead for a permanent failure or when `attempt` reached the cap;
        otherwise Retry at now_s + a jittered wait.
    """
    verdict = classify(result, permanent_statuses)
    if verdict is Verdict.DELIVERED:
        return Done()
    error = describe_failure(result)
    if verdict is Verdict.PERMANENT:
        return Dead(error=f"{error} (permanent)")
    if attempt >= backoff.max_attempts:
        return Dead(error=f"{error} (attempt cap {backoff.max_attempts} reached)")
    return Retry(run_at=now_s + backoff.wait_s(attempt, rng), error=error)
