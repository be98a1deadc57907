"""The Celery side of `hookline bench --compare`: one task per delivery, Redis broker.

Run by the bench as `celery -A hookline.rehearsal.compare.celery_app worker --pool threads
--concurrency C` (two such processes). Settings a team wanting at-least-once delivery sets:
`task_acks_late` (a task is acknowledged after it ran, so a killed worker's tasks are
redelivered once Redis's visibility timeout passes) with `task_reject_on_worker_lost`; no
result backend (nobody reads results). Gossip, mingle and heartbeats are switched off on
the command line (cluster chatter the bench does not need). The broker URL comes from
`COMPARE_BROKER_URL` (default redis://127.0.0.1:6379/0).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery  # type: ignore[import-untyped]

from hookline.rehearsal.compare.peer_tasks import attempt_delivery
from hookline.shared.models import Dead, Retry

app = Celery("hookline_compare",
             broker=os.environ.get("COMPARE_BROKER_URL", "redis://127.0.0.1:6379/0"))
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    task_ignore_result=True,
    task_serializer="json",
    accept_content=["json"],
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


@app.task(bind=True, max_retries=None, name="deliver")  # type: ignore[untyped-decorator]
def deliver(self: Any, destination: str, message_id: str, body: str) -> str:
    """Deliver one event to one destination; on a transient failure, retry with hookline's
    backoff (`self.retry(countdown=...)`), until its attempt cap makes it dead.

    Returns:
        "done" or "dead: <reason>".
    """
    outcome = attempt_delivery(destination, message_id, body, self.request.retries + 1)
    if isinstance(outcome, Retry):
        raise self.retry(countdown=max(0.0, outcome.delay_s))
    if isinstance(outcome, Dead):
        return f"dead: {outcome.error}"
    return "done"

