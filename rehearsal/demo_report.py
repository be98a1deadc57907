"""The closing report of `hookline demo`, in words: what each endpoint simulates, what the
figures mean (why there are more attempts than jobs), the checks, and what to try next."""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Sequence
from typing import Any, Protocol

DASHBOARD_TOKEN = "try-the-dashboard"
"""The admin token the report suggests for looking at the demo database in the dashboard."""

SEND_TOKEN = "try-sending"
"""The ingest token it suggests beside it: without one the service refuses every event and
is not ready (`/readyz` 503, `supervisor_not_ready` in its log)."""

_LISTEN = "127.0.0.1:8080"
_WIDTH = 100


class EndpointFacts(Protocol):
    """What the report needs of a demo endpoint (hookline.rehearsal.demo.DemoEndpoint)."""

    @property
    def name(self) -> str: ...
    @property
    def simulates(self) -> str: ...


def describe(summary: dict[str, Any], endpoints: Sequence[EndpointFacts],
             out_dir: str) -> list[str]:
    """The report's lines for a demo `summary` (hookline.rehearsal.demo._summarise's dict).

    Args:
        summary: the demo's summary (also written as summary.json).
        endpoints: the demo's destinations, in the order to list them.
        out_dir: the folder holding the demo's files and database (as the user typed it).
    """
    statuses = summary["ingest_statuses"]
    accepted, repeats = statuses.get("202", 0), statuses.get("200", 0)
    by_status = summary["jobs_by_status"]
    jobs, attempts = summary["jobs"], summary["attempts"]
    width = max(len(e.name) for e in endpoints)
    lines = [f"hookline demo: {summary['events_posted']} real GitHub webhook payloads, "
             f"delivered end to end in {summary['elapsed_s']:.1f} s.", "",
             textwrap.fill(f"{len(endpoints)} receiving endpoints; each checks the "
                           "signature and remembers the webhook-id of what it already "
                           "handled:", width=_WIDTH)]
    lines += [_hanging(f"  {e.name.ljust(width)}  ", e.simulates) for e in endpoints]
    most = max(summary["max_concurrent_per_endpoint"].values(), default=0)
    figures = [
        ("events", f"{accepted} accepted (202); {repeats} repeats of an id already stored "
                   "were answered 200 duplicate and created nothing"),
        ("jobs", f"{jobs}: one per event and subscribed endpoint; "
                 f"{by_status.get('done', 0)} done, {by_status.get('dead', 0)} dead"),
        ("attempts", f"{attempts}: {_why_more_attempts(summary)}"),
        ("receiver", f"{summary['receiver_effects']} effects, one per delivered job; "
                     f"{summary['duplicates_suppressed_by_receiver']} repeated deliveries "
                     "recognised by webhook-id and ignored"),
        ("in flight", f"at most {most} request at a time per endpoint (each has "
                      "max_in_flight 1)"),
    ]
    lines += ["", "What happened:"]
    lines += [_hanging(f"  {label.ljust(9)}  ", text) for label, text in figures]
    lines += ["", "Checks:"]
    lines += [f"  [{'ok' if passed else 'FAILED'}] {name.replace('_', ' ')}"
              for name, passed in summary["checks"].items()]
    lines += ["", textwrap.fill(f"Files in {out_dir}/: jobs.csv, attempts.csv, receipts.json, "
                                "summary.json, service.log, and the database demo.db.",
                                width=_WIDTH), ""]
    lines += try_next(out_dir, summary.get("example_retried_job"))
    return lines


def _hanging(head: str, text: str) -> str:
    """`head` then `text` wrapped to the report's width, continuation lines under the text."""
    return textwrap.fill(text, width=_WIDTH, initial_indent=head,
                         subsequent_indent=" " * len(head))


def _why_more_attempts(summary: dict[str, Any]) -> str:
    """Why attempts exceed jobs, per endpoint that needed retries."""
    retried = {name: c["attempts"] - c["jobs"]
               for name, c in summary.get("jobs_and_attempts_by_destination", {}).items()
               if c["attempts"] > c["jobs"]}
    if not retried:
        return "one per job: every endpoint answered the first try"
    parts = ", ".join(f"{n} retries for {name}" for name, n in retried.items())
    return (f"more than jobs because failed tries are retried with the same webhook-id "
            f"and body ({parts})")


def try_next(out_dir: str, job_id: int | None) -> list[str]:
    """The 'what to try next' lines: inspect the demo database with the CLI and dashboard."""
    db = shlex.quote(f"{out_dir}/demo.db")
    job = str(job_id) if job_id is not None else "1"
    commands = [
        (f"hookline --db {db} stats", "counts by status, attempts by outcome"),
        (f"hookline --db {db} job {job}", "one job's story: each attempt and its answer"),
        (f"hookline --db {db} dead", "dead letters (`hookline replay` sends them again)"),
        (f"hookline logs {shlex.quote(out_dir + '/service.log')} --job {job}",
         "the service's log lines about that job"),
    ]
    width = max(len(c) for c, _ in commands)
    return ["Try next (the service has stopped; its database stays):",
            *(f"  {command.ljust(width)}  # {what}" for command, what in commands),
            "  The dashboard, on the demo's database:",
            f"    HOOKLINE_ADMIN_TOKEN={DASHBOARD_TOKEN} HOOKLINE_INGEST_TOKEN={SEND_TOKEN} \\",
            f"      hookline --db {db} serve --listen {_LISTEN}",
            f"    then open http://{_LISTEN}/ and enter the token {DASHBOARD_TOKEN}"]
