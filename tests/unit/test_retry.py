"""Retry policy: classification and backoff scheduling, pure (no sockets)."""

from __future__ import annotations

import random

import pytest

from hookline.shared.models import AttemptResult, Dead, Done, Retry
from hookline.shared.policy.retry import Backoff, Verdict, classify, next_attempt

BACKOFF = Backoff(base_s=10.0, cap_s=3600.0, max_attempts=5)


def result(status: int | None = None, error: str | None = None, **kw) -> AttemptResult:
    return AttemptResult(started_at=0.0, duration_s=0.1, status_code=status, error=error, **kw)


@pytest.mark.parametrize("status,verdict", [
    (200, Verdict.DELIVERED), (204, Verdict.DELIVERED), (299, Verdict.DELIVERED),
    (500, Verdict.TRANSIENT), (503, Verdict.TRANSIENT), (408, Verdict.TRANSIENT),
    (425, Verdict.TRANSIENT), (429, Verdict.TRANSIENT), (301, Verdict.TRANSIENT),
    (302, Verdict.TRANSIENT), (307, Verdict.TRANSIENT), (409, Verdict.TRANSIENT),
    (400, Verdict.PERMANENT), (401, Verdict.PERMANENT), (404, Verdict.PERMANENT),
    (410, Verdict.PERMANENT), (413, Verdict.PERMANENT), (422, Verdict.PERMANENT),
])
def test_classify_status(status, verdict):
    """2xx delivered; 408/425/429/5xx/3xx and unlisted 4xx transient; listed 4xx permanent."""
    assert classify(result(status)) is verdict


def test_classify_transport_error_is_transient():
    """No response at all (refused, reset, timeout) is transient."""
    assert classify(result(error="ServerDisconnectedError")) is Verdict.TRANSIENT


def test_backoff_doubles_within_jitter_bounds_and_caps():
    """The n-th wait lies in [d/2, d] with d = min(cap, base * 2**(n-1))."""
    rng = random.Random(7)
    for attempt in range(1, 20):
        d = min(3600.0, 10.0 * 2 ** (attempt - 1))
        waits = [BACKOFF.wait_s(attempt, rng) for _ in range(200)]
        assert min(waits) >= d / 2 and max(waits) <= d
        assert max(waits) - min(waits) > d / 4  # jitter actually spreads


def test_next_attempt_schedules_retry_from_now():
    """A transient failure below the cap is retried at now + the jittered wait."""
    outcome = next_attempt(2, result(503), now_s=1000.0, backoff=BACKOFF,
                           rng=random.Random(1))
    assert isinstance(outcome, Retry)
    assert 10.0 <= outcome.delay_s <= 20.0
    assert outcome.error == "HTTP 503"


def test_next_attempt_dead_at_cap_and_on_permanent():
    """The attempt cap makes a transient failure dead; a permanent status is dead at once."""
    assert isinstance(next_attempt(5, result(503), 0.0, BACKOFF), Dead)
    dead = next_attempt(1, result(410), 0.0, BACKOFF)
    assert isinstance(dead, Dead) and "410" in dead.error
    assert isinstance(next_attempt(1, result(200), 0.0, BACKOFF), Done)


def test_redirect_is_recorded_with_location():
    """A 3xx is not followed; the error names the status and the Location."""
    outcome = next_attempt(1, result(302, location="http://169.254.169.254/"), 0.0, BACKOFF)
    assert isinstance(outcome, Retry) and outcome.error == "HTTP 302 -> http://169.254.169.254/"


def test_default_schedule_outlasts_a_day():
    """With the shipped defaults the shortest total schedule is longer than 24 hours."""
    from hookline.shared.config import Config

    cfg = Config()
    b = Backoff(base_s=cfg.retry_base_s, cap_s=cfg.retry_cap_s, max_attempts=cfg.max_attempts)
    shortest = sum(b.wait_bounds_s(n)[0] for n in range(1, cfg.max_attempts))
    assert shortest > 24 * 3600
