"""Finishing claimed jobs: fenced attempt records and job outcomes, lease extension and
hand-back, each a generator of named-query operations (see :mod:`hookline.shared.store.ops`)
driven by the backend as one transaction.

Every write here is fenced by the claim's lease token: a worker whose lease was taken over
changes nothing (its finish counts 0 rows). The operational events a finish causes (failing,
paused, recovered, dead letters growing: shared/store/notify_tx.py) are decided on the row the
failure-run update returns, so a finish that changes no announced state costs no statement.

A finish locks its jobs first, then their attempt rows, then their destinations, as a claim
taking a job over does (the job, then its old attempt row): on PostgreSQL a late finish (its
lease expired) meeting that claim in the other order was a deadlock
(tests/unit/test_takeover_races.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from hookline.shared.logs import get_logger
from hookline.shared.models import (
    AttemptResult,
    Claim,
    Dead,
    Done,
    HandedBack,
    Outcome,
    Retry,
    is_token_tag,
)
from hookline.shared.policy.delivery import BreakerPolicy, auto_pause_reason, is_failure
from hookline.shared.policy.notify import NotifyPolicy
from hookline.shared.store import notify_tx
from hookline.shared.store.metric_deltas import IN_FLIGHT, MetricDeltas, outcome_class
from hookline.shared.store.ops import NOTIFY, NOW, AfterCommit, Rows, Tx, count, one, rows

log = get_logger()

FAILING_LOG_STREAK = 5
"""Failed attempts in a row after which a destination's `destination_failing` warning is
logged when the operational events' own threshold (`notify_failing_streak`) is off (0)."""
Items = Sequence[tuple[Claim, Outcome, AttemptResult]]
"""What a finish takes: each claim with its outcome and its attempt's result."""


def extend_tx(claims: Sequence[Claim], lease_s: float) -> Tx[set[str]]:
    # One statement for every lease: the worker's heartbeat.
    return {r["lease_token"] for r in (yield rows("extend_lease", lease_s=float(lease_s),
                                                  claims=claim_keys(claims)))}


def claim_keys(claims: Sequence[Claim]) -> Rows:
    return Rows(("job_ids", "lease_tokens"), [(c.job_id, c.lease_token) for c in claims])


GRACEFUL_STOP = "handed back (graceful stop)"
"""The error of an attempt handed back at a graceful stop (its send never finished)."""

ANSWER_LOST = "handed back (claim answer lost)"
"""The error of an attempt handed back because its claim committed but the database's answer
never reached the worker (a connection cut at the commit): never sent."""


def hand_back_tx(claims: Sequence[Claim]) -> Tx[int]:
    """:meth:`hookline.shared.store.Store.hand_back`: how many were handed back."""
    return len((yield from _hand_back(
        [(HandedBack(c.job_id, c.event_id, c.lease_token, c.destination_name, c.tenant_id),
          c.destination_id) for c in claims], GRACEFUL_STOP)))


def hand_back_unheld_tx(worker: str, tag: str, newer_than: str,
                        held: Sequence[str]) -> Tx[list[HandedBack]]:
    """:meth:`hookline.shared.store.Store.hand_back_unheld`. Raises ValueError for a `tag`
    that is not one (an empty one would match nothing, silently)."""
    if not is_token_tag(tag):
        raise ValueError(f"tag must be 8 lowercase hex digits, not {tag!r}")
    leases = [(HandedBack(r["id"], r["event_id"], r["lease_token"], r["destination"],
                          r["tenant_id"]), r["destination_id"])
              for r in (yield rows("unheld_leases", worker=worker, tag=tag,
                                   newer_than=newer_than, held=list(held)))]
    return (yield from _hand_back(leases, ANSWER_LOST))


def _hand_back(leases: Sequence[tuple[HandedBack, int]], reason: str) -> Tx[list[HandedBack]]:
    """Each lease (with its destination's id) back to pending, uncharged and due at once in
    its place in line (the hand_back query), fenced by its token; its attempt row closed
    with `reason`. Returns those handed back."""
    handed: list[HandedBack] = []
    deltas = MetricDeltas()
    for lease, destination_id in leases:
        if (yield count("hand_back", job_id=lease.job_id, lease_token=lease.lease_token)):
            deltas.jobs(destination_id, "running", "pending")
            closed = yield count("mark_attempt_handed_back", lease_token=lease.lease_token,
                                 reason=reason)
            deltas.attempts(destination_id, IN_FLIGHT, "handed_back", closed)
            handed.append(lease)
    yield from deltas.apply()
    if handed:
        yield NOTIFY
    return handed


def finish_tx(items: Items, breaker: BreakerPolicy | None,
              notify: NotifyPolicy) -> Tx[list[bool]]:
    deltas = MetricDeltas()
    kept = yield from finish_all(items, breaker, deltas, notify)
    yield from deltas.apply()
    return kept


def finish_all(items: Items, breaker: BreakerPolicy | None, deltas: MetricDeltas,
               notify: NotifyPolicy) -> Tx[list[bool]]:
    """Every item's fenced finish, then the failure runs of their destinations in id order
    (as claims lock them: two hosts finishing batches over the same destinations cannot
    deadlock); a destination the breaker pauses is logged after the commit.

    An item whose attempt row this finish already completed (the worker retries a write
    whose commit landed but whose answer was lost: a database that froze or a connection
    cut at the commit) counts as written and changes nothing again: no second count of its
    attempt, job or failure run, and no `lease_lost` for it. Only a result whose fenced job
    update took effect moves its destination's failure run: a stale one (its job taken over)
    is recorded in the attempt history only."""
    if (all(isinstance(outcome, Done) and not is_failure(result) for _, outcome, result in items)
            and len({claim.job_id for claim, _, _ in items}) == len(items)):
        return (yield from _finish_delivered(items, deltas, notify))
    kept, fresh = [], []
    for claim, outcome, result in items:
        changed = yield from _finish_one(claim, outcome, result, deltas)
        kept.append(changed is not False)  # None: written before (_finish_one)
        # A stale result (its job was taken over) is history only: the failure run counts
        # the new claim's result. (Its row, closed as lost, cannot tell a retried write.)
        if changed:
            fresh.append((claim, outcome, result))
    for claim, outcome, result in sorted(fresh, key=lambda f: f[0].destination_id):
        yield from _track_failure_run(claim, result, breaker, notify,
                                      died=isinstance(outcome, Dead))
    return kept


def _finish_delivered(items: Items, deltas: MetricDeltas,
                      notify: NotifyPolicy) -> Tx[list[bool]]:
    """The common batch, every attempt acknowledged with a 2xx and no job twice: each step
    one statement for the whole batch (attempt rows, done jobs), then one failure-run reset
    per destination. Same effect as finishing them one by one."""
    # The jobs first (see the module docstring). A job this finish completed before (a
    # retried write) or another claim took over is no longer under this lease: unchanged.
    done = {r["id"] for r in (yield rows("finish_delivered", claims=Rows(
        ("job_ids", "lease_tokens", "waited_s"),
        [(c.job_id, c.lease_token, float(r.waited_s)) for c, _, r in items])))}
    recorded = yield rows("record_attempts", attempts=Rows(
        ("lease_tokens", "started_ats", "durations_s", "status_codes", "errors",
         "response_excerpts", "response_headers", "locations"),
        [(claim.lease_token, r.started_at, r.duration_s, r.status_code, r.error,
          r.response_excerpt, r.response_headers, r.location) for claim, _, r in items]))
    # An attempt already closed as lost (its job taken over) keeps that outcome class; one
    # not returned was completed by this very finish before (finish_all): nothing again.
    now_recorded = {r["lease_token"] for r in recorded}
    closed_now = {r["lease_token"] for r in recorded if not r["was_lost"]}
    for claim, _, result in items:
        if claim.lease_token in closed_now:
            deltas.attempts(claim.destination_id, IN_FLIGHT,
                            outcome_class(result.error, result.status_code))
    # Each job finished when its answer arrived: the write's instant less the result's wait.
    if done:
        now = yield NOW
        for claim, _, result in items:
            if claim.job_id in done:
                _delivered(deltas, claim, now - result.waited_s)
    for destination_id in sorted({claim.destination_id for claim, _, _ in items
                                  if claim.job_id in done}):  # as finish_all: not stale ones
        yield from _succeeded(destination_id, notify)
    return [claim.job_id in done or claim.lease_token not in now_recorded
            for claim, _, _ in items]


def _delivered(deltas: MetricDeltas, claim: Claim, finished_at: float) -> None:
    """Count a claim's job becoming done at `finished_at` (running -> done, and its latency),
    unix seconds on the store's clock."""
    deltas.jobs(claim.destination_id, "running", "done")
    if claim.received_at is not None:
        deltas.delivered(claim.destination_id, finished_at - claim.received_at)


def _finish_one(claim: Claim, outcome: Outcome, result: AttemptResult,
                deltas: MetricDeltas) -> Tx[bool | None]:
    """Record one job's outcome and its attempt, fenced by the lease token, the job first
    (see the module docstring); whether the fenced write changed the job, or None when this
    finish had completed both before (a retried write, see finish_all: nothing is done
    again)."""
    fence = {"job_id": claim.job_id, "lease_token": claim.lease_token}
    waited = {"waited_s": float(result.waited_s)}  # finished_at: the answer's arrival
    if isinstance(outcome, Done):
        changed = yield count("finish_done", **fence, **waited)
    elif isinstance(outcome, Retry):  # due `delay_s` after now, on the store's clock
        changed = yield count("finish_retry", **fence, error=outcome.error,
                              delay_s=max(0.0, float(outcome.delay_s)))
    elif isinstance(outcome, Dead):
        changed = yield count("finish_dead", **fence, **waited, error=outcome.error)
    else:
        raise TypeError(f"unknown outcome {outcome!r}")
    recorded = yield rows("record_attempt", lease_token=claim.lease_token,
                          started_at=result.started_at, duration_s=result.duration_s,
                          status_code=result.status_code, error=result.error,
                          response_excerpt=result.response_excerpt,
                          response_headers=result.response_headers, location=result.location)
    if not recorded and changed != 1:
        return None
    for r in recorded:  # a row already closed as lost keeps that outcome class
        if not r["was_lost"]:
            deltas.attempts(claim.destination_id, IN_FLIGHT,
                            outcome_class(result.error, result.status_code))
    if changed != 1:
        return False
    if isinstance(outcome, Done):
        _delivered(deltas, claim, (yield NOW) - result.waited_s)
    else:
        deltas.jobs(claim.destination_id, "running",
                    "pending" if isinstance(outcome, Retry) else "dead")
    return True


def fail_unsendable_tx(claim: Claim, error: str, now: float,
                       deltas: MetricDeltas) -> Tx[bool]:
    """Finish a job just claimed in this transaction as dead, its attempt closed with
    `error`: its stored row cannot be read into a request (a malformed value written by hand),
    so it never can be, and claiming it again would only fail the same way. `now`: the
    store's clock, unix seconds. Returns whether the fenced finish changed the job."""
    result = AttemptResult(started_at=now, duration_s=0.0, error=error, unsendable=True)
    return bool((yield from _finish_one(claim, Dead(error=error), result, deltas)))


def _succeeded(destination_id: int, notify: NotifyPolicy) -> Tx[None]:
    """End the destination's failure run (a row comes back only when it changed something
    or a recovery is to be announced)."""
    row = yield one("destination_succeeded", destination_id=destination_id)
    if row is not None and row["notified_state"] != "ok":
        yield from notify_tx.recovered_tx(notify, row)


def _track_failure_run(claim: Claim, result: AttemptResult, breaker: BreakerPolicy | None,
                       notify: NotifyPolicy, *, died: bool) -> Tx[None]:
    """Update the destination's failure run (and its dead letters when the job `died`);
    pause it when the breaker says so; announce what changed (operational events)."""
    if not is_failure(result):
        yield from _succeeded(claim.destination_id, notify)
        return
    run = yield one("destination_failed", destination_id=claim.destination_id, dead=int(died))
    if run is None:
        return
    now = yield NOW
    if died:
        yield from notify_tx.dead_letters_tx(notify, run, now, result.error)
    if run["paused"]:
        return
    streak = int(run["failure_streak"])
    if streak == (notify.failing_streak or FAILING_LOG_STREAK):
        # Once per failure run (the streak passes this number once), whether or not
        # operational events are on: an operator reading warnings sees the destination.
        name, tenant, status, error = (run["name"], run["tenant_id"], result.status_code,
                                       result.error)
        yield AfterCommit(lambda: log.warning(
            "destination_failing", destination=name, tenant=tenant, failure_streak=streak,
            last_status_code=status, last_error=error))
    reason = None if breaker is None else auto_pause_reason(
        result, run["url"], run["failure_streak"], run["failing_since"], now, breaker)
    if reason is None or not (yield count("auto_pause", destination_id=claim.destination_id,
                                          reason=reason)):
        yield from notify_tx.failing_tx(notify, run, now, result.status_code, result.error)
        return
    # The tenant too: every tenant may have a destination of this name.
    name, tenant, streak = run["name"], run["tenant_id"], run["failure_streak"]
    yield AfterCommit(lambda: log.warning("destination_auto_paused", destination=name,
                                          tenant=tenant, reason=reason, failure_streak=streak))
    yield from notify_tx.paused_tx(notify, run, reason, result.status_code)
