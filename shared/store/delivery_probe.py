"""Waiting for a test delivery's outcome: the admin API, the tenant API and the CLI send a
test event (:meth:`hookline.shared.store.Store.send_test_event`), then read its job until
the first attempt that reached a verdict has finished, for at most a bound, and answer alike.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from hookline.shared.record_models import Attempt, JobStory
from hookline.shared.store import Store
from hookline.shared.store.metric_deltas import outcome_class
from hookline.shared.store.tenant_reads_tx import TestDelivery

CLAIM_ALLOWANCE_S = 2.0
"""How long a test delivery may wait for a worker to claim its job, on top of the attempt
timeout, before the answer gives the job's state instead of its outcome."""
_POLL_FIRST_S, _POLL_MAX_S = 0.02, 0.25
"""How often the job is read while waiting: soon at first, then less often."""
NOT_OUTCOMES = frozenset({"worker_lost", "handed_back"})
"""Attempt classes that end without the receiver's answer: the job is tried again."""


async def first_outcome(store: Store, job_id: int, tenant: str,
                        bound_s: float) -> tuple[JobStory, Attempt | None]:
    """Read a job until its first finished attempt with a verdict (the receiver's answer, or
    a transport error) is there, or `bound_s` seconds have passed.

    Args:
        store: the open store.
        job_id: the test delivery's job.
        tenant: its tenant.
        bound_s: the longest wait, seconds.

    Returns:
        The job as last read, and that attempt (None: none finished in time).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    pause = _POLL_FIRST_S
    while True:
        story = await store.get_job(job_id, tenant=tenant)
        for attempt in story.attempts:
            if attempt.duration_s is not None and outcome_class(
                    attempt.error, attempt.status_code) not in NOT_OUTCOMES:
                return story, attempt
        left = deadline - loop.time()
        if left <= 0:
            return story, None
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, _POLL_MAX_S)


def delivery_probe_view(sent: TestDelivery, story: JobStory | None = None,
                       attempt: Attempt | None = None, waited_s: float | None = None
                       ) -> dict[str, Any]:
    """A test delivery as the APIs answer it (schema `TestDelivery`): the event and its job;
    once waited for, `job_status` and `attempt` (its outcome, status, duration in seconds and
    response excerpt), or `attempt` null and `waited_s` when it had not finished."""
    out: dict[str, Any] = dataclasses.asdict(sent)
    if story is None:
        return out
    out["job_status"] = story.job.status
    if attempt is None:
        out.update(attempt=None, waited_s=waited_s)
        return out
    out["attempt"] = {
        "attempt": attempt.attempt, "outcome": outcome_class(attempt.error, attempt.status_code),
        "status_code": attempt.status_code, "duration_s": attempt.duration_s,
        "error": attempt.error, "response_excerpt": attempt.response_excerpt,
        "started_at": attempt.started_at}
    return out
