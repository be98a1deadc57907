"""A job story's attempt runs (shared/views.py): each resend or replay numbers its attempts
from 1 again and starts a run; an attempt handed back at a graceful stop did not count, so
the claim after it takes its number again within the same run."""

from __future__ import annotations

from hookline.shared.record_models import Attempt
from hookline.shared.views import _with_runs


def _attempts(*numbered: tuple[int, str | None]) -> list[Attempt]:
    return [Attempt(job_id=1, attempt=n, worker="w", lease_token=f"t{i}", started_at=float(i),
                    duration_s=0.01, status_code=None if error else 200, error=error,
                    response_excerpt=None) for i, (n, error) in enumerate(numbered)]


def _runs(*numbered: tuple[int, str | None]) -> list[tuple[int, int]]:
    return [(view["run"], view["attempt"]) for view in _with_runs(_attempts(*numbered))]


def test_retries_stay_in_a_run_and_a_resend_starts_the_next():
    assert _runs((1, "boom"), (2, "boom"), (3, None), (1, None)) == [
        (1, 1), (1, 2), (1, 3), (2, 1)]
    assert _runs((1, None), (1, None), (1, None)) == [(1, 1), (2, 1), (3, 1)]


def test_a_handed_back_attempt_does_not_start_a_run():
    handed = "handed back (graceful stop)"
    assert _runs((1, handed), (1, None)) == [(1, 1), (1, 1)]
    assert _runs((1, "x"), (2, "x"), (3, "x"), (1, handed), (1, "x"), (2, None)) == [
        (1, 1), (1, 2), (1, 3), (2, 1), (2, 1), (2, 2)]
    assert _runs((1, "x"), (2, handed), (2, None), (1, None)) == [
        (1, 1), (1, 2), (1, 2), (2, 1)]


def test_a_lost_lease_counts_like_any_attempt():
    assert _runs((1, "lease expired (worker lost)"), (2, None)) == [(1, 1), (1, 2)]
