"""The Huey side of `hookline bench --compare`: one task per delivery, SQLite storage.

Run by the bench as `huey_consumer hookline.rehearsal.compare.huey_app.huey -k thread -w C` (two
such processes on one SQLite file). Huey's SQLite storage keeps its defaults: WAL, SQLite's own
`synchronous` (FULL, like hookline's default), a task row deleted when a worker takes it (so
a consumer killed mid-task loses that delivery: at most once). The database file comes from
`COMPARE_HUEY_DB` (default huey.db).

A retry is the task enqueueing its own next attempt with `.schedule(delay=...)`, the attempt
number as an argument: Huey's `RetryTask(delay=...)` re-runs a task with the same arguments
and keeps no attempt count, which hookline's attempt cap needs.
"""

from __future__ import annotations

import os

from huey import SqliteHuey  # type: ignore[import-untyped]

from hookline.rehearsal.compare.peer_tasks import attempt_delivery
from hookline.shared.models import Dead, Retry

huey = SqliteHuey("hookline_compare", filename=os.environ.get("COMPARE_HUEY_DB", "huey.db"),
                  results=False)


@huey.task()  # type: ignore[untyped-decorator]
def deliver(destination: str, message_id: str, body: str, attempt: int = 1) -> str:
    """Deliver one event to one destination; on a transient failure, schedule attempt
    `attempt + 1` after hookline's backoff, until its attempt cap makes it dead.

    Returns:
        "done", "retry" or "dead: <reason>" (not stored: results are off).
    """
    outcome = attempt_delivery(destination, message_id, body, attempt)
    if isinstance(outcome, Retry):
        deliver.schedule(args=(destination, message_id, body, attempt + 1),
                         delay=max(0.0, outcome.delay_s))
        return "retry"
    if isinstance(outcome, Dead):
        return f"dead: {outcome.error}"
    return "done"
