"""The per-source token buckets of ingest (ingest/rate_limit.py), on a fake clock."""

from __future__ import annotations

import pytest

from hookline.ingest.rate_limit import SourceRateLimiter, retry_after_s
from hookline.shared.config import Config
from hookline.shared.errors import ConfigError
from tests.conftest import FakeClock


def test_burst_then_refill_at_the_rate(clock: FakeClock):
    """A full bucket lets `burst` events through at once; then one per 1/rate seconds, and the
    refusal says how long until the next token."""
    limiter = SourceRateLimiter(2.0, 3, clock=clock)
    assert [limiter.take("a") for _ in range(3)] == [None, None, None]
    assert limiter.take("a") == pytest.approx(0.5)
    clock.advance(0.25)
    assert limiter.take("a") == pytest.approx(0.25)  # a refusal spends nothing
    clock.advance(0.25)
    assert limiter.take("a") is None
    clock.advance(60)  # refills to burst, never past it
    assert [limiter.take("a") for _ in range(4)][-1] == pytest.approx(0.5)


def test_sources_have_their_own_buckets(clock: FakeClock):
    """Emptying one source's bucket does not touch another's."""
    limiter = SourceRateLimiter(1.0, 1, clock=clock)
    assert limiter.take("a") is None and limiter.take("a") is not None
    assert limiter.take("b") is None


def test_off_by_default_and_at_rate_zero():
    """The default Config turns limiting off; a rate of 0 lets everything through."""
    limiter = SourceRateLimiter.from_config(Config())
    assert not limiter.enabled
    assert all(limiter.take("a") is None for _ in range(10_000))


def test_bucket_count_is_bounded(clock: FakeClock):
    """Past max_sources, the least recently used bucket is dropped (it starts full again)."""
    limiter = SourceRateLimiter(1.0, 1, clock=clock, max_sources=2)
    for name in ("a", "b", "c"):
        assert limiter.take(name) is None
    assert len(limiter._buckets) == 2
    assert limiter.take("a") is None  # "a" was dropped: a full bucket again
    assert limiter.take("c") is not None


@pytest.mark.parametrize(("wait_s", "header"), [(0.001, 1), (1.0, 1), (1.01, 2), (99.5, 100)])
def test_retry_after_is_whole_seconds_at_least_one(wait_s, header):
    assert retry_after_s(wait_s) == header


@pytest.mark.parametrize("settings", [{"ingest_rate_per_s": -1.0},
                                      {"ingest_rate_per_s": float("inf")},
                                      {"ingest_burst": 0}])
def test_bad_settings_are_config_errors(settings):
    with pytest.raises(ConfigError):
        Config(**settings)
