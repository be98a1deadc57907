"""Stored instants under a real wall-clock step of a running `hookline serve` (SQLite; the
clock is stepped with libfaketime, tests/acceptance/stepped_host.py).

- +1 h while serving, with retention ages of 30 min and a retention round every second: done
  jobs, bodies and dedupe keys about 20 s old stay, `dead --since 10m` still lists the dead
  jobs, and re-posting an accepted event id is answered duplicate (not accepted and sent again
  under a new webhook-id).
- -1 h, then a restart (which re-anchors the store's clock to the wall clock): retries
  scheduled before it go out when they were due, not an hour later.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import wait_until
from stepped_host import SteppedHost, eventually

EVENTS = 3
HOUR_S = 3600.0
# Retries due 6 s ahead: still ahead once the step and the restart (about 3 s) are done.
RETRY_AFTER_S = 6


@pytest.fixture
def host(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[SteppedHost]:
    """The service with retention ages of 30 min, a round every second, and the receiver's
    endpoints (destinations) the test names in `@pytest.mark.parametrize("host", ...)`.
    Backoff starts at 1 s, so a Retry-After of RETRY_AFTER_S sets when a retry is due (the
    wait is the longer of the two; the default base, 10 s, would outlast it)."""
    stepped = SteppedHost(
        tmp_path, request.param,
        {"HOOKLINE_RETENTION_INTERVAL_S": "1", "HOOKLINE_RETENTION_BODIES_S": "1800",
         "HOOKLINE_RETENTION_METADATA_S": "1800", "HOOKLINE_RETENTION_DEDUPE_S": "1800",
         "HOOKLINE_RETRY_BASE_S": "1"})
    yield stepped
    stepped.close()


def _statuses(host: SteppedHost) -> dict[str, list[str]]:
    """Job statuses per destination."""
    found: dict[str, list[str]] = {}
    for job in host.jobs():
        found.setdefault(job["destination"], []).append(job["status"])
    return found


# `refused` answers a permanent 400: its jobs die at once (a 410 would pause it instead).
@pytest.mark.parametrize("host", [{"ok": "ok", "refused": "status:400"}], indirect=True)
def test_a_forward_step_while_serving_purges_nothing_early(host: SteppedHost) -> None:
    """+1 h with 30 min retention ages: nothing young is purged, dead letters stay listed
    as recent, and an accepted id stays a duplicate."""
    wait_until(host.ready, 30, "/readyz to answer 200")
    host.post_events("a", EVENTS)
    assert eventually(lambda: _statuses(host) == {"ok": ["done"] * EVENTS,
                                                  "refused": ["dead"] * EVENTS}, 30)
    assert len(host.cli_json("dead", "--since", "10m")) == EVENTS
    rounds_before = len(host.log("retention_purged"))
    host.step_to("+1h")
    wait_until(lambda: len(host.log("retention_purged")) >= rounds_before + 3, 30,
               "three retention rounds after the step")
    purged = [r for r in host.log("retention_purged")
              if any(r[k] for k in ("bodies", "jobs", "attempts", "events"))]
    assert purged == []
    statuses = _statuses(host)
    assert statuses == {"ok": ["done"] * EVENTS, "refused": ["dead"] * EVENTS}, statuses
    assert len(host.cli_json("dead", "--since", "10m")) == EVENTS
    events = host.cli_json("events", "--since", "10m")["events"]
    assert len(events) == EVENTS and all(e["body_purged_at"] is None for e in events), events
    status, answer = host.post_event("a-0")
    assert status == 200 and answer.get("duplicate") is True, (status, answer)
    sent_ok = [r for r in host.requests() if r["endpoint"] == "ok"]
    assert len(sent_ok) == EVENTS  # nothing delivered again


@pytest.mark.parametrize("host", [{"later": f"retry_after:{RETRY_AFTER_S}"}], indirect=True)
def test_a_restart_after_a_backward_step_keeps_retries_on_time(host: SteppedHost) -> None:
    """Retries scheduled RETRY_AFTER_S ahead, then -1 h and a restart (the store's clock is
    re-anchored an hour back): each retry is sent about when it was due, not an hour later."""
    wait_until(host.ready, 30, "/readyz to answer 200")
    host.post_events("r", EVENTS)
    wait_until(lambda: len(host.log("job_retry_scheduled")) >= EVENTS, 30, "retries scheduled")
    host.step_to("-1h")
    host.restart()
    all_done = eventually(lambda: _statuses(host).get("later") == ["done"] * EVENTS,
                          RETRY_AFTER_S + 30)
    # The receiver stamps requests with its wall clock, stepped like everyone's: the retry,
    # sent after the step, is stamped HOUR_S behind real time. (Its log is in sending order.)
    by_webhook: dict[str, list[float]] = {}
    for r in host.requests():
        by_webhook.setdefault(r["webhook_id"], []).append(r["received_at"])
    stalls = [t[1] + HOUR_S - (t[0] + RETRY_AFTER_S) for t in by_webhook.values() if len(t) == 2]
    print(f"retry stall after a restart following a 1 h backward step: "
          f"max {max(stalls, default=float('nan')):.1f} s over {len(stalls)} retries "
          f"(due {RETRY_AFTER_S} s after the first attempt)")
    assert all_done, "retries stalled by the step back"
    assert len(stalls) == EVENTS
    anchored = host.log("store_clock_anchored", reason="serve_start")
    assert anchored and anchored[-1]["moved_s"] == pytest.approx(-HOUR_S, abs=5)
