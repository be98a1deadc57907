"""Finishing claimed jobs: fenced attempt records and job outcomes, lease extension and
hand-back, each a generator of named-query operations (see :mod:`hookline.shared.store.ops`)
driven by the backend as one transaction.

Every write here is fenced by the claim's lease token: a worker whose lease was taken over
changes nothing (its finish counts 0 rows).
"""

from __future__ import annotations

from collections.abc import Sequence

from hookline.shared.logs import get_logger
from hookline.shared.models import AttemptResult, Claim, Dead, Done, Outcome, Retry
from hookline.shared.policy.delivery import BreakerPolicy, auto_pause_reason, is_failure
from hookline.shared.store.metric_deltas import IN_FLIGHT, MetricDeltas, outcome_class
from hookline.shared.store.ops import NOTIFY, NOW, AfterCommit, Rows, Tx, count, one, rows

log = get_logger()
Items = Sequence[tuple[Claim, Outcome, AttemptResult]]
"""What a finish takes: each claim with its outcome and its attempt's result."""


def extend_tx(claims: Sequence[Claim], lease_s: float) -> Tx[set[str]]:
    # One statement for every lease: the worker's heartbeat.
    return {r["lease_token"] for r in (yield rows("extend_lease", lease_s=float(lease_s),
                                                  claims=claim_keys(claims)))}


def claim_keys(claims: Sequence[Claim]) -> Rows:
    return Rows(("job_ids", "lease_tokens"), [(c.job_id, c.lease_token) for c in claims])


def hand_back_tx(claims: Sequence[Claim]) -> Tx[int]:
    handed = 0
    deltas = MetricDeltas()
    for c in claims:
        if (yield count("hand_back", job_id=c.job_id, lease_token=c.lease_token)):
            deltas.jobs(c.destination_id, "running", "pending")
            closed = yield count("mark_attempt_handed_back", lease_token=c.lease_token)
            deltas.attempts(c.destination_id, IN_FLIGHT, "handed_back", closed)
            handed += 1
    yield from deltas.apply()
    if handed:
        yield NOTIFY
    return handed


def finish_tx(items: Items, breaker: BreakerPolicy | None) -> Tx[list[bool]]:
    deltas = MetricDeltas()
    kept = yield from finish_all(items, breaker, deltas)
    yield from deltas.apply()
    return kept


def finish_all(items: Items, breaker: BreakerPolicy | None,
                deltas: MetricDeltas) -> Tx[list[bool]]:
    """Every item's fenced finish, then the failure runs of their destinations in id order
    (as claims lock them: two hosts finishing batches over the same destinations cannot
    deadlock); a destination the breaker pauses is logged after the commit."""
    if (all(isinstance(outcome, Done) and not is_failure(result) for _, outcome, result in items)
            and len({claim.job_id for claim, _, _ in items}) == len(items)):
        return (yield from _finish_delivered(items, deltas))
    kept = []
    for claim, outcome, result in items:
        kept.append((yield from _finish_one(claim, outcome, result, deltas)))
    for claim, _, result in sorted(items, key=lambda item: item[0].destination_id):
        yield from _track_failure_run(claim, result, breaker)
    return kept


def _finish_delivered(items: Items, deltas: MetricDeltas) -> Tx[list[bool]]:
    """The common batch, every attempt acknowledged with a 2xx and no job twice: each step
    one statement for the whole batch (attempt rows, done jobs), then one failure-run reset
    per destination. Same effect as finishing them one by one."""
    recorded = yield rows("record_attempts", attempts=Rows(
        ("lease_tokens", "started_ats", "durations_s", "status_codes", "errors",
         "response_excerpts", "response_headers", "locations"),
        [(claim.lease_token, r.started_at, r.duration_s, r.status_code, r.error,
          r.response_excerpt, r.response_headers, r.location) for claim, _, r in items]))
    # An attempt already closed as lost (its job taken over) keeps that outcome class.
    closed_now = {r["lease_token"] for r in recorded if not r["was_lost"]}
    for claim, _, result in items:
        if claim.lease_token in closed_now:
            deltas.attempts(claim.destination_id, IN_FLIGHT,
                            outcome_class(result.error, result.status_code))
    done = {r["id"] for r in (yield rows("finish_delivered",
                                         claims=claim_keys([c for c, _, _ in items])))}
    if done:
        now = yield NOW
        for claim, _, _ in items:
            if claim.job_id in done:
                _delivered(deltas, claim, now)
    for destination_id in sorted({claim.destination_id for claim, _, _ in items}):
        yield count("destination_succeeded", destination_id=destination_id)
    return [claim.job_id in done for claim, _, _ in items]


def _delivered(deltas: MetricDeltas, claim: Claim, now: float) -> None:
    """Count a claim's job becoming done at `now` (running -> done, and its latency)."""
    deltas.jobs(claim.destination_id, "running", "done")
    if claim.received_at is not None:
        deltas.delivered(claim.destination_id, now - claim.received_at)


def _finish_one(claim: Claim, outcome: Outcome, result: AttemptResult,
                deltas: MetricDeltas) -> Tx[bool]:
    fence = {"job_id": claim.job_id, "lease_token": claim.lease_token}
    recorded = yield rows("record_attempt", lease_token=claim.lease_token,
                          started_at=result.started_at, duration_s=result.duration_s,
                          status_code=result.status_code, error=result.error,
                          response_excerpt=result.response_excerpt,
                          response_headers=result.response_headers, location=result.location)
    for r in recorded:  # a row already closed as lost keeps that outcome class
        if not r["was_lost"]:
            deltas.attempts(claim.destination_id, IN_FLIGHT,
                            outcome_class(result.error, result.status_code))
    if isinstance(outcome, Done):
        changed = yield count("finish_done", **fence)
        if changed == 1:
            _delivered(deltas, claim, (yield NOW))
    elif isinstance(outcome, Retry):  # due `delay_s` after now, on the store's clock
        changed = yield count("finish_retry", **fence, error=outcome.error,
                              delay_s=max(0.0, float(outcome.delay_s)))
        if changed == 1:
            deltas.jobs(claim.destination_id, "running", "pending")
    elif isinstance(outcome, Dead):
        changed = yield count("finish_dead", **fence, error=outcome.error)
        if changed == 1:
            deltas.jobs(claim.destination_id, "running", "dead")
    else:
        raise TypeError(f"unknown outcome {outcome!r}")
    return bool(changed == 1)


def _track_failure_run(claim: Claim, result: AttemptResult,
                       breaker: BreakerPolicy | None) -> Tx[None]:
    """Update the destination's failure run; pause it when the breaker says so."""
    if not is_failure(result):
        yield count("destination_succeeded", destination_id=claim.destination_id)
        return
    run = yield one("destination_failed", destination_id=claim.destination_id)
    if run is None or breaker is None or run["paused"]:
        return
    now = yield NOW
    reason = auto_pause_reason(result, run["url"], run["failure_streak"], run["failing_since"],
                               now, breaker)
    if reason is None or not (yield count("auto_pause", destination_id=claim.destination_id,
                                          reason=reason)):
        return
    name, streak = run["name"], run["failure_streak"]
    yield AfterCommit(lambda: log.warning("destination_auto_paused", destination=name,
                                          reason=reason, failure_streak=streak))
