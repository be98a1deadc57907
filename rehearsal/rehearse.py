"""`hookline rehearse`: run the crash and recovery scenarios and write the evidence.

Writes to OUT: completion.json (per scenario: expected, checks, observed, pass/fail, time),
jobs.csv and attempts.csv (every scenario's rows, with a `scenario` column), receipts.json
(what the receiver saw), and operations-report.html (table, timelines, attempt plots).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from hookline.rehearsal import drill
from hookline.rehearsal.harness import write_csv
from hookline.rehearsal.report import render
from hookline.rehearsal.scenarios import SCENARIOS, Result, Scenario
from hookline.rehearsal.store_scenarios import STORE_SCENARIOS
from hookline.shared.db_url import is_postgres_url
from hookline.shared.logs import configure_logging


async def run_one(scenario: Scenario, out_dir: Path) -> tuple[dict[str, Any], Result | None]:
    """Run one scenario in its own folder; an exception is a failed scenario, not a crash."""
    t0 = time.monotonic()
    try:
        result = await scenario.run(out_dir / "scenarios" / scenario.name)
        error = None
    except Exception as exc:  # noqa: BLE001  (a broken scenario is reported, the rest run)
        result, error = None, f"{type(exc).__name__}: {exc}"
        traceback.print_exc(file=sys.stderr)
    entry: dict[str, Any] = {
        "name": scenario.name, "expected": scenario.expected,
        "checks": result.checks if result else {},
        "observed": result.observed if result else {},
        "passed": bool(result and all(result.checks.values())) and error is None,
        "duration_s": round(time.monotonic() - t0, 2), "error": error,
    }
    if result is not None:
        entry["timeline"] = result.timeline
        entry["marks_t"] = [(t["t"], t["what"]) for t in result.timeline if t["source"] == "drill"]
        entry["attempts_t"] = [(a["started_at"] - result.started,
                                str(a["status_code"] or a["error"]))
                               for a in result.attempts]
    return entry, result


async def rehearse(out_dir: Path, quick: bool, only: list[str] | None = None
                   ) -> list[dict[str, Any]]:
    """Run the scenarios (the quick subset with `quick`) one after another."""
    out_dir.mkdir(parents=True, exist_ok=True)
    chosen = [s for s in [*SCENARIOS, *STORE_SCENARIOS]
              if (not quick or s.quick) and (not only or s.name in only)
              and not (s.sqlite_only and drill.POSTGRES_URL is not None)]
    entries, jobs, attempts, receipts = [], [], [], {}
    for scenario in chosen:
        entry, result = await run_one(scenario, out_dir)
        mark = "pass" if entry["passed"] else "FAIL"
        print(f"  [{mark}] {scenario.name} ({entry['duration_s']} s)", flush=True)
        if not entry["passed"]:
            failed = [k for k, ok in entry["checks"].items() if not ok]
            print(f"         failed checks: {', '.join(failed)} {entry['error'] or ''}".rstrip(),
                  flush=True)
        entries.append(entry)
        if result is not None:
            jobs += [{"scenario": scenario.name, **j} for j in result.jobs]
            attempts += [{"scenario": scenario.name, **a} for a in result.attempts]
            receipts[scenario.name] = result.receipts
    summary = [{k: v for k, v in e.items() if k not in ("timeline", "marks_t", "attempts_t")}
               for e in entries]
    (out_dir / "completion.json").write_text(json.dumps(summary, indent=2, default=str))
    write_csv(out_dir / "jobs.csv", jobs)
    write_csv(out_dir / "attempts.csv", attempts)
    (out_dir / "receipts.json").write_text(json.dumps(receipts, indent=1, default=str))
    (out_dir / "operations-report.html").write_text(render(entries))
    return entries


def run(out_dir: str = "results/rehearsal", quick: bool = False,
        only: list[str] | None = None, postgres_url: str | None = None,
        db: str | None = None) -> int:
    """Run and print one line per scenario; exit 0 when every scenario passed, else 1.
    With `postgres_url`, or a `db` setting naming a PostgreSQL server, every drill runs on a
    fresh database on that server (else on SQLite files of its own)."""
    if db is not None and is_postgres_url(db):
        postgres_url = db
    configure_logging("rehearse", "warning", stream=sys.stderr)
    drill.POSTGRES_URL = postgres_url
    print(f"hookline rehearse{' --quick' if quick else ''}: results in {out_dir}/")
    entries = asyncio.run(rehearse(Path(out_dir), quick, only))
    passed = sum(e["passed"] for e in entries)
    print(f"{passed} passed, {len(entries) - passed} failed")
    return 0 if passed == len(entries) else 1
