"""A real `hookline serve` (SQLite) whose host clock is stepped +1 h and then -1 h while jobs
are in flight to a slow receiver and retries are scheduled.

The wall clock is stepped with libfaketime (tests/acceptance/stepped_host.py). Expected: the
supervisor aborts no child, no job is marked dead "worker lost", no job is sent twice, a retry
scheduled before the step back is not stalled by it, and every process logs `clock_step`.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from procs import wait_until
from stepped_host import SteppedHost, eventually

HEARTBEAT_TIMEOUT_S = 5.0
SLOW_S = 3.0


@pytest.fixture
def host(tmp_path: Path) -> Any:
    stepped = SteppedHost(
        tmp_path, {"slow": f"slow:{SLOW_S}", "flaky": "fail:1"},
        {"HOOKLINE_HEARTBEAT_TIMEOUT_S": str(HEARTBEAT_TIMEOUT_S), "HOOKLINE_LEASE_S": "8",
         "HOOKLINE_ATTEMPT_TIMEOUT_S": "6", "HOOKLINE_RETRY_BASE_S": "4",
         "HOOKLINE_MAX_ATTEMPTS": "3"})
    yield stepped
    stepped.close()


def test_serve_rides_out_a_forward_and_a_backward_clock_step(host: SteppedHost) -> None:
    """+1 h with slow sends in flight, then -1 h with retries scheduled: nothing is aborted,
    lost, sent twice or stalled."""
    wait_until(host.ready, 30, "/readyz to answer 200")
    host.post_events("a", 6)
    wait_until(lambda: _slow_in_flight(host), 20, "slow sends in flight")
    host.step_to("+1h")
    # Long enough for a stale heartbeat to be judged (the supervisor looks every tick), and
    # the test goes on for seconds more before it reads the kills.
    time.sleep(HEARTBEAT_TIMEOUT_S + 1)
    host.post_events("b", 6)
    # The flaky destination fails each first attempt: wait until its retries are scheduled
    # (about 2-4 s ahead), then step back two hours to one hour behind.
    if not eventually(lambda: len(host.log("job_retry_scheduled")) >= 12, 30):
        raise AssertionError(f"retries not scheduled: {_stalled(host)}")
    host.step_to("-1h")
    stepped_back_at = time.monotonic()
    all_done = eventually(lambda: _all_done(host), 60)
    done_after_s = time.monotonic() - stepped_back_at

    kills = host.log("child_hung")
    lost = [j for j in host.jobs() if "worker lost" in str(j.get("last_error"))]
    sends = Counter((r["endpoint"], r["webhook_id"]) for r in host.requests()
                    if r["endpoint"] == "slow")
    print(f"clock-step figures: supervisor kills={len(kills)}, worker-lost jobs={len(lost)}, "
          f"max sends per slow job={max(sends.values(), default=0)}, all done={all_done} "
          f"{done_after_s:.1f} s after the step back")
    assert kills == []
    assert lost == []
    assert len(sends) == 12 and set(sends.values()) == {1}, sends
    # Retries were due 2-4 s after they were scheduled; 60 s is generous, far below the hour.
    assert all_done, f"jobs stalled by the step back: {_stalled(host)}"
    steps = [(r["process"], r["step_s"]) for r in host.log("clock_step")]
    processes = {p for p, _ in steps}
    assert {"supervisor", "ingest", "worker-1", "worker-2"} <= processes, steps
    assert all(abs(s - 3600) < 5 or abs(s + 7200) < 5 for _, s in steps), steps
    # /metrics counts the supervisor's steps (its snapshot is written every 2 s).
    supervisor_steps = len([p for p, _ in steps if p == "supervisor"])
    assert supervisor_steps == 2, steps
    wait_until(lambda: f"hookline_clock_steps_total {supervisor_steps}.0" in host.metrics(), 10,
               "hookline_clock_steps_total in /metrics")


def _slow_in_flight(host: SteppedHost) -> bool:
    return any(j["status"] == "running" for j in host.jobs() if j.get("destination") == "slow")


def _all_done(host: SteppedHost) -> bool:
    jobs = host.jobs()
    return len(jobs) == 24 and all(j["status"] == "done" for j in jobs)


def _stalled(host: SteppedHost) -> dict[str, Any]:
    """What a failure message needs: the jobs not done and what the receiver answered."""
    unfinished = [{k: j.get(k) for k in ("id", "destination", "status", "attempts", "run_at",
                                         "last_error")}
                  for j in host.jobs() if j["status"] != "done"]
    answers = Counter((r["endpoint"], r["status"]) for r in host.requests())
    return {"unfinished": unfinished, "receiver answers": dict(answers),
            "retries scheduled": len(host.log("job_retry_scheduled"))}
