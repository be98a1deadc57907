"""The metric families hookline's processes count in memory, described once.

The supervisor, ingest and every worker count these in their own memory
(:class:`hookline.shared.process.metrics_file.ProcessMetrics`) and leave snapshots in the runtime
folder; ingest's `/metrics` (ingest/metrics.py) turns the snapshots into families with the type,
help and label names given here. The families read from the database at scrape time are described
in ingest/metrics.py.

Label values are bounded: routes are the app's registered routes, reasons and causes are
code-defined words, slots are the supervisor's slot names; never event or job ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "gauge", "histogram"]

ACCEPT_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                          5.0, 10.0)
"""Upper bounds of the accept latency histogram, seconds."""

BATCH_SIZE_BUCKETS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0)
"""Upper bounds of the group-commit batch size histogram, events (512 is the largest batch)."""


@dataclass(frozen=True, slots=True)
class Family:
    """One in-process metric family.

    Attributes:
        name: the exposed name (counters end in `_total`).
        kind: counter, gauge or histogram.
        help: the HELP text.
        labels: label names, in the order the writers give label values.
        per_slot: the family is kept per process: ingest adds a `slot` label (first) naming
            the process that wrote it, and shows it only while that process runs.
        carried: counters and histograms a process continues from its slot's last snapshot
            when it restarts, so they never go down; False for figures of one process's life
            (its CPU time starts at zero, as Prometheus expects of a process counter).
    """

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    per_slot: bool = False
    carried: bool = True


INGEST_REQUESTS = Family(
    "hookline_ingest_requests_total", "counter",
    "HTTP requests answered by ingest, by route (METHOD and path pattern) and status code.",
    ("route", "status"))
INGEST_REJECTIONS = Family(
    "hookline_ingest_rejections_total", "counter",
    "Events refused by ingest (4xx/5xx on an event route), by the answer's error code.",
    ("reason",))
INGEST_ACCEPT_SECONDS = Family(
    "hookline_ingest_accept_seconds", "histogram",
    "Time from request to 2xx answer on an event route (the commit included), seconds.")
INGEST_BATCH_SIZE = Family(
    "hookline_ingest_batch_size", "histogram",
    "Events per group-commit transaction.")
WRITE_LOCK_WAIT_SECONDS = Family(
    "hookline_write_lock_wait_seconds", "histogram",
    "Wait for the SQLite write lock before each write transaction, seconds, per process.",
    per_slot=True)
PROCESS_CPU_SECONDS = Family(
    "hookline_process_cpu_seconds_total", "counter",
    "User and system CPU time of the process, seconds.", per_slot=True, carried=False)
PROCESS_RESIDENT_MEMORY_BYTES = Family(
    "hookline_process_resident_memory_bytes", "gauge",
    "Resident memory of the process, bytes.", per_slot=True, carried=False)
PROCESS_START_TIME_SECONDS = Family(
    "hookline_process_start_time_seconds", "gauge",
    "Start time of the process, unix seconds.", per_slot=True, carried=False)
CHILDREN_WANTED = Family(
    "hookline_children_wanted", "gauge",
    "Child processes the supervisor keeps running, by kind (ingest, worker).", ("kind",))
CHILDREN_ALIVE = Family(
    "hookline_children_alive", "gauge",
    "Child processes running now, by kind (ingest, worker).", ("kind",))
CHILD_RESTARTS = Family(
    "hookline_child_restarts_total", "counter",
    "Unexpected child exits the supervisor respawned, by slot and cause "
    "(crash, transient, hung, signal, exit).", ("slot", "cause"))
HEARTBEAT_AGE_SECONDS = Family(
    "hookline_heartbeat_age_seconds", "gauge",
    "Time since each child last heartbeat, seconds (max() is the oldest).", ("slot",))
CLOCK_STEPS = Family(
    "hookline_clock_steps_total", "counter",
    "Wall-clock steps the supervisor saw (wall and monotonic clocks apart by more than 1 s).")
SCHEMA_MISMATCHES = Family(
    "hookline_ingest_schema_mismatches_total", "counter",
    "Events whose `data` failed their catalogue schema at publish, by event type and the "
    "type's validation mode (warn: accepted and marked; reject: refused).",
    ("type", "validation"))
STORE_TIMEOUTS = Family(
    "hookline_store_timeouts_total", "counter",
    "Database calls of the process that missed a deadline (PostgreSQL: pg_transaction_timeout_s"
    ", a LISTEN ping; a silent network or a stuck server), per process.", per_slot=True)
OTEL_SPANS_DROPPED = Family(
    "hookline_otel_spans_dropped_total", "counter",
    "Trace spans that never reached the collector (tracing on), by reason: queue_full (the "
    "export queue was full) or export_failed (the collector refused the batch or could not "
    "be reached).", ("reason",))

FAMILIES: tuple[Family, ...] = (
    INGEST_REQUESTS, INGEST_REJECTIONS, INGEST_ACCEPT_SECONDS, INGEST_BATCH_SIZE,
    WRITE_LOCK_WAIT_SECONDS, PROCESS_CPU_SECONDS, PROCESS_RESIDENT_MEMORY_BYTES,
    PROCESS_START_TIME_SECONDS, CHILDREN_WANTED, CHILDREN_ALIVE, CHILD_RESTARTS,
    HEARTBEAT_AGE_SECONDS, CLOCK_STEPS, STORE_TIMEOUTS, OTEL_SPANS_DROPPED, SCHEMA_MISMATCHES)
BY_NAME = {family.name: family for family in FAMILIES}
