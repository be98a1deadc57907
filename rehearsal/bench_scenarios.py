"""`hookline bench --scenario backlog|outage`: runs for the memory and recovery targets.

Both start like `hookline bench` (rehearsal/bench.py) and write `scenario-<name>.json` to the
output folder:

* **backlog** (rehearsal/scenario_backlog.py): query plans of the claim path, claim time and
  worker memory with a big backlog of pending jobs (seeded through the store,
  rehearsal/backlog_seed.py);
* **outage** (rehearsal/scenario_outage.py): one destination down under steady load, the
  others' latency before, during and after, and its drain;
* **fairness** (rehearsal/scenario_fairness.py): tenant b's latency alone and while tenant a
  has a big backlog and hanging endpoints;
* **destinations** and **tenants** (rehearsal/scenario_scale.py): ingest events/s with many
  destinations, or many tenants, against a small installation in the same run;
* **ingest** (rehearsal/scenario_ingest.py): ingest's events/s against the bare aiohttp
  server and the least durable ingest, with one and two HTTP processes, in one run;
* **everyday** (rehearsal/scenario_everyday.py): CPU per event and per delivery at steady
  rates against flat out, the service's cores and latency at 200 events/s, and Huey's CPU
  per delivery at that rate (each run its own `hookline bench`, with its own database).

Times: `*_unix` are unix seconds (time.time()); durations are seconds unless named `_ms`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hookline.rehearsal.bench import BenchOptions, bench_database, redact
from hookline.rehearsal.machine_probe import cold_read_text, machine_figures
from hookline.rehearsal.scenario_backlog import print_backlog, run_backlog
from hookline.rehearsal.scenario_common import OUTAGE_KINDS, SCENARIOS, ScenarioOptions
from hookline.rehearsal.scenario_everyday import print_everyday, run_everyday
from hookline.rehearsal.scenario_fairness import print_fairness, run_fairness
from hookline.rehearsal.scenario_ingest import print_ingest, run_ingest
from hookline.rehearsal.scenario_outage import print_outage, run_outage
from hookline.rehearsal.scenario_scale import print_scale, run_scale
from hookline.shared.config import Config

__all__ = ["ScenarioOptions", "print_scenario", "run_scenario"]


def run_scenario(opts: ScenarioOptions, config: Config | None = None) -> dict[str, Any]:
    """Run one scenario; returns the figures also written to `out_dir/scenario-<name>.json`.

    Args:
        opts: what to run.
        config: the effective settings (flags, HOOKLINE_* environment, file) whose delivery
            policy the service gets; recorded in the result. None: the defaults.

    Raises:
        ValueError: an unknown scenario, outage kind or backend, or a backlog or ingest
            scenario on PostgreSQL.
        RuntimeError: the destinations, tenants or ingest scenario without wrk, or a process
            of the ingest scenario's floor ended before it served.
        TimeoutError: the service did not come up, or jobs were not delivered in time.
    """
    if opts.scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, not {opts.scenario!r}")
    if opts.outage_kind not in OUTAGE_KINDS:
        raise ValueError(f"outage kind must be 503 or hang, not {opts.outage_kind!r}")
    if opts.scenario in ("backlog", "ingest") and opts.backend != "sqlite":
        raise ValueError(f"the {opts.scenario} scenario runs on SQLite only")
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"hookline-{opts.scenario}-", dir=opts.out_dir))
    config = config or Config()
    load_at_start = list(os.getloadavg())
    if opts.scenario == "everyday":  # each of its runs makes its own database and folder
        figures, description = run_everyday(opts), "a fresh one for each run"
    elif opts.scenario == "ingest":  # each design makes its own SQLite file
        figures, description = run_ingest(opts, work), "a fresh SQLite file for each design"
    else:
        bench_opts = BenchOptions(backend=opts.backend, postgres_url=opts.postgres_url,
                                  out_dir=opts.out_dir)
        with bench_database(bench_opts, work) as (db, description, _postmaster):
            if opts.scenario == "backlog":
                figures = run_backlog(opts, work, db, config)
            elif opts.scenario == "fairness":
                figures = run_fairness(opts, work, db, config)
            elif opts.scenario in ("destinations", "tenants"):
                figures = run_scale(opts, work, db, config)
            else:
                figures = run_outage(opts, work, db, config)
    result = {
        "scenario": opts.scenario,
        "backend": {"name": opts.backend, "database": description},
        "machine": {**machine_figures(work), "load_average_at_start": load_at_start,
                    "load_average_at_end": list(os.getloadavg())},
        "options": {f: redact(str(getattr(opts, f))) for f in opts.__slots__},
        "policy": {name: getattr(config, name) for name in (
            "worker_concurrency", "claim_batch", "lease_s", "attempt_timeout_s",
            "max_attempts", "retry_base_s", "breaker_failures", "breaker_min_span_s",
            "breaker_window_s", "late_retry_after_attempts", "late_retry_share",
            "destination_slot_share", "tenant_slot_share")},
        **figures,
    }
    (opts.out_dir / f"scenario-{opts.scenario}.json").write_text(json.dumps(result, indent=2))
    return result


def print_scenario(result: dict[str, Any]) -> None:
    """A short human summary of a scenario's `result`."""
    print(f"scenario {result['scenario']} on {result['backend']['name']} "
          f"({result['backend']['database']}); load average at start "
          f"{result['machine']['load_average_at_start']}, at end "
          f"{result['machine']['load_average_at_end']}"
          + (f"; {cold}" if (cold := cold_read_text(result["machine"])) else ""))
    if result["scenario"] == "backlog":
        print_backlog(result)
    elif result["scenario"] == "fairness":
        print_fairness(result)
    elif result["scenario"] in ("destinations", "tenants"):
        print_scale(result)
    elif result["scenario"] == "everyday":
        print_everyday(result)
    elif result["scenario"] == "ingest":
        print_ingest(result)
    else:
        print_outage(result)
    print(f"checks: {result['checks']}")
    print("PASS" if result["pass"] else "FAIL")
