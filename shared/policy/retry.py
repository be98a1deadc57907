"""Retry policy: pure decisions, no I/O (unit tested without sockets).

`classify` sorts one attempt's result into delivered / transient / permanent;
`next_attempt` turns that into an :data:`~hookline.shared.models.Outcome` for the store.

Backoff formula ("equal jitter"): the n-th wait (after attempt n) is
    d = min(cap_s, base_s * 2 ** (n - 1));  wait = d / 2 + uniform(0, d / 2)
so waits never shrink to zero (unlike full jitter) yet spread retries of many jobs apart.
With the defaults (base 10 s, cap 8 h, 18 attempts) the schedule spans 26 to 51 hours,
outlasting a day-long outage of the destination, like the leading senders' schedules.

`Retry-After` (429 and 503 only) can lengthen a wait, never shorten it: the wait is
min(cap_s, max(server delay, backoff)); see :func:`parse_retry_after` for the accepted forms.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from enum import Enum

from hookline.shared.logs import get_logger
from hookline.shared.models import AttemptResult, Dead, Done, Outcome, Retry

log = get_logger()

# Statuses that mean "try later": request timeout, too early, rate limited (RFC 9110, 8470,
# 6585). Every 5xx is transient too.
TRANSIENT_STATUSES = frozenset({408, 425, 429})
# 4xx that mean the request will never succeed as is: dead at once instead of retrying.
DEFAULT_PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 405, 410, 413, 415, 422})
# Statuses whose Retry-After header is honoured (RFC 9110 section 10.2.3, RFC 6585).
RETRY_AFTER_STATUSES = frozenset({429, 503})
# A Retry-After value longer than this is junk (an IMF-fixdate is 29 characters).
_RETRY_AFTER_MAX_LEN = 64


class Verdict(Enum):
    """How one attempt ended."""

    DELIVERED = "delivered"
    TRANSIENT = "transient"
    PERMANENT = "permanent"


def doubling_s(step: int, base_s: float, cap_s: float) -> float:
    """The capped exponential every backoff in hookline uses: ``base_s * 2 ** (step - 1)``,
    at most `cap_s`, in seconds, for step 1, 2, ... (delivery retries, store retries, child
    respawns). The exponent stops growing at 64 so a huge step cannot overflow."""
    return float(min(cap_s, base_s * 2.0 ** min(step - 1, 64)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """Backoff settings, in seconds; see the module docstring for the formula."""

    base_s: float
    cap_s: float
    max_attempts: int

    def wait_bounds_s(self, attempt: int) -> tuple[float, float]:
        """(shortest, longest) wait after attempt number `attempt` (1-based)."""
        d = doubling_s(attempt, self.base_s, self.cap_s)
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
    `permanent_statuses` are permanent; any other 4xx is transient. A request that could not
    be sent as stored (`result.unsendable`, e.g. a header value holding CR/LF) is permanent.
    """
    code = result.status_code
    if code is None:
        # Nothing answered: transient, unless the request itself could never be sent.
        return Verdict.PERMANENT if result.unsendable else Verdict.TRANSIENT
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


def parse_retry_after(value: str | None, now_s: float,
                      cap_s: float | None = None) -> float | None:
    """Parse a `Retry-After` header into a delay in seconds; never raises.

    Accepts delta-seconds (`120`: ASCII digits only) and HTTP-dates (IMF-fixdate, RFC 850 and
    asctime forms; a date without a zone is UTC). A date in the past gives 0.

    Args:
        value: the header value, or None when absent.
        now_s: current unix time, seconds (for dates).
        cap_s: when given, the result is clamped to at most this many seconds.

    Returns:
        The delay in seconds, within [0, cap_s]; None when the header is absent or junk
        (non-numeric, negative, fractional, longer than 64 characters, a date past year
        9999); junk is logged as `retry_after_ignored`.
    """
    if value is None:
        return None
    text = value.strip()
    delay: float | None = None
    if not text or len(text) > _RETRY_AFTER_MAX_LEN:
        delay = None
    elif text.isascii() and text.isdigit():
        delay = float(int(text))
    elif any(c.isalpha() for c in text):
        try:
            when = parsedate_to_datetime(text)
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            delay = max(0.0, when.timestamp() - now_s)
        except (ValueError, TypeError, OverflowError, IndexError):
            delay = None
    if delay is None or not math.isfinite(delay):
        log.warning("retry_after_ignored", value=value[:_RETRY_AFTER_MAX_LEN])
        return None
    return delay if cap_s is None else min(delay, cap_s)


def next_attempt(attempt: int, result: AttemptResult, now_s: float, backoff: Backoff,
                 rng: random.Random | None = None,
                 permanent_statuses: frozenset[int] = DEFAULT_PERMANENT_STATUSES) -> Outcome:
    """Decide what happens to a job after attempt number `attempt` produced `result`.

    Args:
        attempt: 1-based number of the attempt just made (counted at claim).
        result: what happened on the wire.
        now_s: current unix time, seconds (wall clock: an HTTP-date `Retry-After` is read
            against it).
        backoff: the schedule and the attempt cap.

    Returns:
        Done on 2xx; Dead for a permanent failure or when `attempt` reached the cap;
        otherwise Retry after a jittered wait. On 429 and 503 with a valid
        `Retry-After`, the wait is max(server's delay, our backoff), clamped to
        `backoff.cap_s`; a junk Retry-After is ignored (see :func:`parse_retry_after`).
    """
    verdict = classify(result, permanent_statuses)
    if verdict is Verdict.DELIVERED:
        return Done()
    error = describe_failure(result)
    if verdict is Verdict.PERMANENT:
        return Dead(error=f"{error} (permanent)")
    if attempt >= backoff.max_attempts:
        return Dead(error=f"{error} (attempt cap {backoff.max_attempts} reached)")
    wait_s = backoff.wait_s(attempt, rng)
    if result.status_code in RETRY_AFTER_STATUSES:
        server_s = parse_retry_after(result.retry_after, now_s, cap_s=backoff.cap_s)
        if server_s is not None:
            wait_s = min(backoff.cap_s, max(server_s, wait_s))
    return Retry(delay_s=wait_s, error=error)
