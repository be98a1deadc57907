"""Retry-After parsing and its effect on the schedule; configurable permanent statuses (pure)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from hookline.shared.config import Config
from hookline.shared.errors import ConfigError
from hookline.shared.models import AttemptResult, Dead, Retry
from hookline.shared.policy.retry import Backoff, Verdict, classify, next_attempt, parse_retry_after

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
BACKOFF = Backoff(base_s=10.0, cap_s=3600.0, max_attempts=10)


def http_date(unix_s: float) -> str:
    return format_datetime(datetime.fromtimestamp(unix_s, UTC), usegmt=True)


def result(status: int | None, retry_after: str | None = None) -> AttemptResult:
    return AttemptResult(started_at=NOW, duration_s=0.1, status_code=status,
                         retry_after=retry_after)


@pytest.mark.parametrize(("value", "expected"), [
    ("0", 0.0), ("120", 120.0), (" 7 ", 7.0), ("000030", 30.0),
    (http_date(NOW + 90), 90.0),                                  # IMF-fixdate, future
    (http_date(NOW - 3600), 0.0),                                 # a past date counts as zero
    (http_date(NOW), 0.0),
    ("Friday, 15-Jan-27 08:02:00 GMT", 120.0),                    # RFC 850 form
    ("Fri Jan 15 08:01:00 2027", 60.0),                           # asctime form (UTC)
])
def test_parse_retry_after_valid_forms(value, expected):
    """Delta-seconds and all three HTTP-date forms parse to seconds from now; past -> 0."""
    assert parse_retry_after(value, NOW) == pytest.approx(expected, abs=1.0)


@pytest.mark.parametrize("value", [
    "", "soon", "-5", "1.5", "3e2", "0x10", "+5", "12abc", "１２",  # noqa: RUF001  (fullwidth digits, on purpose)
    "9" * 65,                                                     # absurdly long
    "Sun, 06 Nov 10000 08:49:37 GMT",                             # past year 9999
    "Wed, 32 Nov 2030 00:00:00 GMT",                              # no such day
])
def test_parse_retry_after_junk_is_ignored_with_a_warning(value):
    """Junk (non-numeric, negative, fractional, too long, year > 9999) gives None and logs
    `retry_after_ignored`; it never raises."""
    with capture_logs() as logs:
        assert parse_retry_after(value, NOW) is None
    assert [e["event"] for e in logs] == ["retry_after_ignored"]


def test_parse_retry_after_absent_is_none_without_warning():
    """No header at all is not junk: None, nothing logged."""
    with capture_logs() as logs:
        assert parse_retry_after(None, NOW) is None
    assert logs == []


def test_parse_retry_after_clamps_to_cap():
    """A huge but well-formed delay is clamped to cap_s."""
    assert parse_retry_after("99999999999999999999", NOW, cap_s=3600.0) == 3600.0
    assert parse_retry_after(http_date(NOW + 10 * 86400), NOW, cap_s=60.0) == 60.0


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(st.text(max_size=80), st.integers(-10**30, 10**30).map(str),
                       st.floats(allow_nan=True).map(str),
                       st.datetimes(timezones=st.just(UTC)).map(format_datetime)))
def test_parse_retry_after_never_raises_and_stays_in_range(value):
    """Property: any string yields None or a delay within [0, cap]."""
    delay = parse_retry_after(value, NOW, cap_s=3600.0)
    assert delay is None or 0.0 <= delay <= 3600.0


@pytest.mark.parametrize("status", [429, 503])
def test_server_delay_longer_than_backoff_wins(status):
    """On 429/503 the next attempt waits the server's delay when it exceeds our backoff."""
    outcome = next_attempt(1, result(status, "600"), NOW, BACKOFF, rng=random.Random(1))
    assert isinstance(outcome, Retry) and outcome.delay_s == pytest.approx(600)


@pytest.mark.parametrize("status", [429, 503])
def test_backoff_longer_than_server_delay_wins(status):
    """A short Retry-After does not shorten our backoff (attempt 5: wait >= 80 s)."""
    outcome = next_attempt(5, result(status, "1"), NOW, BACKOFF, rng=random.Random(1))
    assert isinstance(outcome, Retry)
    assert 80.0 <= outcome.delay_s <= 160.0


def test_retry_after_date_is_honoured_and_clamped_to_cap():
    """An HTTP-date Retry-After counts from now and is clamped to the per-wait cap."""
    outcome = next_attempt(1, result(503, http_date(NOW + 1200)), NOW, BACKOFF,
                           rng=random.Random(1))
    assert isinstance(outcome, Retry) and outcome.delay_s == pytest.approx(1200, abs=1)
    capped = next_attempt(1, result(429, "86400"), NOW, BACKOFF, rng=random.Random(1))
    assert isinstance(capped, Retry) and capped.delay_s == 3600.0


def test_retry_after_ignored_on_other_statuses_and_when_junk():
    """Retry-After on a 500 is not honoured; junk on a 429 falls back to plain backoff."""
    for res in (result(500, "600"), result(429, "later please")):
        outcome = next_attempt(1, res, NOW, BACKOFF, rng=random.Random(1))
        assert isinstance(outcome, Retry) and 5.0 <= outcome.delay_s <= 10.0


def test_retry_after_never_beats_the_attempt_cap():
    """A Retry-After on the final attempt still ends the job dead."""
    outcome = next_attempt(10, result(429, "5"), NOW, BACKOFF)
    assert isinstance(outcome, Dead) and "attempt cap" in outcome.error


def test_permanent_statuses_are_configurable():
    """Config.permanent_statuses decides which 4xx are dead at once; others are retried."""
    custom = Config(permanent_statuses="400, 422").permanent_status_set
    assert custom == frozenset({400, 422})
    assert classify(result(404), custom) is Verdict.TRANSIENT
    assert classify(result(422), custom) is Verdict.PERMANENT
    assert classify(result(404)) is Verdict.PERMANENT  # the documented default
    assert Config(permanent_statuses="").permanent_status_set == frozenset()


@pytest.mark.parametrize("bad", ["500", "abc", "400,20x", "399"])
def test_permanent_statuses_reject_non_4xx(bad):
    """Only 4xx codes may be permanent; anything else is a ConfigError naming the value."""
    with pytest.raises(ConfigError, match="4xx"):
        Config(permanent_statuses=bad)
