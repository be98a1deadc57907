"""`hookline maintenance recount-metrics`, the real CLI process on a real database (both
backends): maintained gauges written over by hand are counted again from the rows, the
command names each one it corrected, and /metrics' figures are right afterwards."""

from __future__ import annotations

import dataclasses
import json

from procs import run_cli

from hookline.shared.report_models import DestinationFigures
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from tests.conftest import execute_db, new_event


async def test_recount_metrics_sets_hand_corrupted_gauges_right(real_store: Store,
                                                                store_url: str):
    """Two destinations' jobs, in flight and events gauges are changed by hand (as a bug or a
    manual edit would leave them); the command prints each corrected gauge with its wrong
    and right value, the store's figures equal the rows again, and a second run finds
    nothing to correct (exit 0 both times)."""
    for name in ("a", "b"):
        await real_store.add_destination(name=name, url="http://127.0.0.1:9/h",
                                         secret=generate_secret(), event_types=[name],
                                         max_in_flight=5)
    await real_store.add_events([new_event("a1", "a"), new_event("a2", "a"),
                                 new_event("b1", "b")])
    await real_store.claim("w", 1, 30.0, 3)  # the oldest job: one of a's, now running
    good, _ = await real_store.destination_figures()
    assert [(f.name, f.jobs, f.in_flight) for f in good] == [
        ("a", {"pending": 1, "running": 1}, 1), ("b", {"pending": 1}, 0)]
    await real_store.fold_metric_deltas()
    await execute_db(store_url, "UPDATE metric_counts SET n = n + 7 "
                                "WHERE family = 'jobs' AND label = 'pending'")
    await execute_db(store_url, "UPDATE metric_counts SET n = 40 WHERE family = 'events'")
    await execute_db(store_url, "DELETE FROM metric_counts WHERE family = 'attempts' "
                                "AND label = 'in_flight'")
    bad, _ = await real_store.destination_figures()
    assert bad != good

    done = run_cli("--db", store_url, "maintenance", "recount-metrics")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].split() == ["FAMILY", "DESTINATION", "LABEL", "BEFORE", "AFTER"]
    assert lines[0] == "recounted the metric gauges: corrected 6", done.stdout
    rows = [line.split() for line in lines[2:]]
    assert ["events", "(all)", "-", "40", "3"] in rows
    assert ["jobs", "(all)", "pending", "9", "2"] in rows
    assert ["jobs", "a", "pending", "8", "1"] in rows
    assert ["jobs", "b", "pending", "8", "1"] in rows
    assert ["attempts", "(all)", "in_flight", "-", "1"] in rows
    assert ["attempts", "a", "in_flight", "-", "1"] in rows
    fixed, _ = await real_store.destination_figures()
    assert _without_ages(fixed) == _without_ages(good)
    assert (await real_store.stats()).events == 3

    again = run_cli("--db", store_url, "maintenance", "recount-metrics", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"corrected": []}


def _without_ages(figures: list[DestinationFigures]) -> list[DestinationFigures]:
    """The figures without the oldest due job's age (real time passes between reads)."""
    return [dataclasses.replace(f, oldest_due_age_s=None) for f in figures]
