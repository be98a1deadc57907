"""Read-only admin views the dashboard needs, beside the admin API's routes.

Routes (JSON, same Bearer access and error shape as ingest/admin_api.py):
    GET /v1/admin/destination-stats?window=15m
        [{"name", "paused", "paused_reason", "failure_streak", "failing_since",
          "max_in_flight", "in_flight", "pending", "dead", "oldest_pending_at",
          "latency_samples", "delivered_samples", "p50_s", "p99_s"}, ...] per live
        destination, creation order; percentiles of attempt durations started within
        `window`, and how many of those attempts got a 2xx (Store.destination_summaries).
    GET /v1/admin/metrics/destinations?after=0&limit=100
        {"destinations": [{"name", "paused", "paused_reason", "failure_streak",
          "oldest_due_age_s", "jobs", "attempts", "in_flight", "latency", "folded"}, ...],
         "next_after"}: every live destination's /metrics figures, by id, a page at a time,
        also of those /metrics adds up under `_other` (Store.destination_figures); the next
        page is `after=next_after`, null on the last.
    GET /v1/admin/throughput?window=30m&bucket=60
        {"bucket_s", "buckets": [{"start_s", "events", "delivered", "dead", "failed"}, ...]},
        oldest first, zero-filled; the last bucket is still filling; `failed` (attempts that
        did not deliver) is null where it was not counted (Store.throughput).
    GET /v1/admin/jobs/{id}/event?max_bytes=65536
        {"job_id", "event_id", "type", "size_bytes", "truncated", "body_purged_at",
         "valid_utf8", "body"}: the start of the event's stored body as text (invalid UTF-8
        replaced by U+FFFD), at most `max_bytes` (<= 1 MiB) bytes of it.
    GET /v1/admin/supervisor
        {"known": true, "pid", "stopping", "workers_wanted", "workers_alive",
         "workers_healthy", "slots", "updated_at", "age_s"} from the supervisor's
        `status.json` in the runtime folder, or {"known": false, "detail"} when there is
        none, it is unreadable, or the supervisor that wrote it is gone.
    GET /v1/admin/processes
        {"supervised", "children": {"ingest"|"worker": {"wanted", "alive"}}, "restarts",
         "clock_steps", "processes": [{"slot", "running", "cpu_s",
         "resident_memory_bytes", "started_at", "heartbeat_age_s", "restarts": {cause: n}}]}:
        the supervisor's children and each process's health, from the same merged
        per-process snapshots /metrics reads (hookline.ingest.metrics.process_families).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from hookline.ingest.admin_api import guarded
from hookline.ingest.app_state import app_config, request_reader, request_store, tenant_scope
from hookline.ingest.metrics import process_families
from hookline.ingest.tenant_scope import existing_tenant_filter
from hookline.shared.errors import ConfigError, InvalidInput
from hookline.shared.metrics_catalog import (
    CHILD_RESTARTS,
    CHILDREN_ALIVE,
    CHILDREN_WANTED,
    CLOCK_STEPS,
    HEARTBEAT_AGE_SECONDS,
    PROCESS_CPU_SECONDS,
    PROCESS_RESIDENT_MEMORY_BYTES,
    PROCESS_START_TIME_SECONDS,
)
from hookline.shared.policy.inputs import whole_number
from hookline.shared.process.lifecycle import STATUS_FILE, pid_alive, read_status, runtime_dir
from hookline.shared.process.metrics_file import Labels
from hookline.shared.timeparse import parse_duration
from hookline.shared.views import (
    destination_summary_view,
    metric_destinations_view,
    throughput_view,
)

DEFAULT_LATENCY_WINDOW = "15m"
DEFAULT_THROUGHPUT_WINDOW = "30m"
DEFAULT_BUCKET_S = 60
MAX_THROUGHPUT_BUCKETS = 1440
DEFAULT_FIGURES_PAGE = 100
MAX_FIGURES_PAGE = 1000
DEFAULT_BODY_BYTES = 64 * 1024
MAX_BODY_BYTES = 1024 * 1024
_SUPERVISOR_KEYS = ("pid", "stopping", "workers_wanted", "workers_alive", "workers_healthy",
                    "slots", "updated_at")


def register(app: web.Application) -> None:
    """Add the dashboard's read-only admin routes (see the module docstring) to `app`."""
    routes = [
        ("GET", "/v1/admin/destination-stats", destination_stats),
        ("GET", "/v1/admin/metrics/destinations", metric_destinations),
        ("GET", "/v1/admin/throughput", throughput),
        ("GET", "/v1/admin/jobs/{id}/event", job_event),
        ("GET", "/v1/admin/supervisor", supervisor),
        ("GET", "/v1/admin/processes", processes),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, guarded(handler))


def _duration(request: web.Request, name: str, default: str) -> float:
    """A duration query parameter (`90s`, `15m`, `2h`), seconds. Raises InvalidInput(name)
    (400)."""
    try:
        return parse_duration(request.query.get(name, default))
    except ConfigError as exc:
        raise InvalidInput(name, str(exc)) from None


async def destination_stats(request: web.Request) -> web.Response:
    """`GET /v1/admin/destination-stats?window=15m&tenant=T`: state, job counts and latency
    per live destination, of one tenant when given (see the module docstring)."""
    window_s = _duration(request, "window", DEFAULT_LATENCY_WINDOW)
    tenant = await existing_tenant_filter(request)
    summaries = await request_reader(request).destination_summaries(latency_window_s=window_s,
                                                                    tenant=tenant)
    return web.json_response([destination_summary_view(s) for s in summaries])


async def metric_destinations(request: web.Request) -> web.Response:
    """`GET /v1/admin/metrics/destinations?after=&limit=`: a page of every live destination's
    /metrics figures (see the module docstring)."""
    after = whole_number("after", request.query.get("after"), default=0, low=0)
    limit = whole_number("limit", request.query.get("limit"), default=DEFAULT_FIGURES_PAGE,
                         high=MAX_FIGURES_PAGE)
    page, next_after = await request_reader(request).destination_figures(after_id=after,
                                                                         limit=limit)
    return web.json_response(metric_destinations_view(page, next_after))


async def throughput(request: web.Request) -> web.Response:
    """`GET /v1/admin/throughput?window=30m&bucket=60`: events accepted, jobs done/dead and
    failed attempts per bucket of `bucket` seconds (at most 1440 buckets)."""
    window_s = _duration(request, "window", DEFAULT_THROUGHPUT_WINDOW)
    bucket_s = whole_number("bucket", request.query.get("bucket"), default=DEFAULT_BUCKET_S)
    if window_s / bucket_s > MAX_THROUGHPUT_BUCKETS:
        raise InvalidInput("bucket", f"window / bucket must be at most "
                                     f"{MAX_THROUGHPUT_BUCKETS} buckets")
    buckets = await request_reader(request).throughput(window_s=window_s, bucket_s=bucket_s)
    return web.json_response(throughput_view(bucket_s, buckets))


async def job_event(request: web.Request) -> web.Response:
    """`GET /v1/admin/jobs/{id}/event?max_bytes=N`: the start of a job's event body as text
    (also `GET /v1/tenant/jobs/{id}/event`: of the token's tenant's jobs only; another
    tenant's job is 404)."""
    job_id = whole_number("id", request.match_info["id"])
    max_bytes = whole_number("max_bytes", request.query.get("max_bytes"),
                             default=DEFAULT_BODY_BYTES)
    body = await request_store(request).event_body(job_id, min(max_bytes, MAX_BODY_BYTES),
                                                   tenant=tenant_scope(request))
    text, valid = decode_head(body.head, truncated=body.truncated)
    return web.json_response({
        "job_id": job_id, "event_id": body.event_id, "type": body.type,
        "size_bytes": body.size_bytes, "truncated": body.truncated,
        "body_purged_at": body.body_purged_at, "valid_utf8": valid, "body": text})


def decode_head(head: bytes, *, truncated: bool) -> tuple[str, bool]:
    """Decode the start of a body as UTF-8 for display.

    Args:
        head: the bytes to show.
        truncated: True when `head` was cut from a longer body; a multi-byte character cut in
            two at its end is then dropped rather than reported as invalid.

    Returns:
        (text, valid): `valid` is False when bytes had to be replaced by U+FFFD.
    """
    try:
        return head.decode("utf-8"), True
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(head) - 3 and exc.reason == "unexpected end of data":
            return head[:exc.start].decode("utf-8", errors="replace"), True
        return head.decode("utf-8", errors="replace"), False


async def supervisor(request: web.Request) -> web.Response:
    """`GET /v1/admin/supervisor`: the supervisor's view of its workers, or known: false."""
    return web.json_response(supervisor_view(runtime_dir(app_config(request.app)) / STATUS_FILE,
                                             time.time()))


def supervisor_view(path: Path, now_s: float) -> dict[str, Any]:
    """What `GET /v1/admin/supervisor` answers for the status file at `path`.

    Args:
        path: the supervisor's `status.json` (see :mod:`hookline.shared.process.lifecycle`).
        now_s: current unix time, seconds (for `age_s`).

    Returns:
        `{"known": True, ...status fields, "age_s"}`, or `{"known": False, "detail": why}` when
        the file is missing or unreadable, or names a supervisor pid that no longer runs on
        this host (it was killed without cleaning up).
    """
    status = read_status(path)
    if status is None:
        return {"known": False, "detail": f"no readable supervisor {STATUS_FILE} in the "
                                          "runtime folder (ingest runs without `hookline serve`?)"}
    pid = status.get("pid")
    if isinstance(pid, int) and not pid_alive(pid):
        return {"known": False,
                "detail": f"the supervisor (pid {pid}) that wrote {STATUS_FILE} is not running"}
    view: dict[str, Any] = {"known": True, **{k: status.get(k) for k in _SUPERVISOR_KEYS}}
    updated = status.get("updated_at")
    view["age_s"] = now_s - updated if isinstance(updated, int | float) else None
    return view




async def processes(request: web.Request) -> web.Response:
    """`GET /v1/admin/processes`: children wanted and alive, restarts by slot and cause, and
    each process's heartbeat age, CPU and memory (see :func:`processes_view`)."""
    return web.json_response(processes_view(process_families(request.app)))


_SLOT_NUMBER = re.compile(r"([0-9]+)$")
_PROCESS_FIGURES = (("cpu_s", PROCESS_CPU_SECONDS),
                    ("resident_memory_bytes", PROCESS_RESIDENT_MEMORY_BYTES),
                    ("started_at", PROCESS_START_TIME_SECONDS))


def _slot_order(slot: str) -> tuple[int, str, int]:
    """supervisor, ingest, ingest-2, ..., then worker-1, worker-2, ..., worker-10 (numbers in
    order)."""
    rank = 0 if slot == "supervisor" else 1 if slot.startswith("ingest") else 2
    number = _SLOT_NUMBER.search(slot)
    return rank, _SLOT_NUMBER.sub("", slot), int(number.group(1)) if number else 0


def processes_view(merged: Mapping[str, Mapping[Labels, Any]]) -> dict[str, Any]:
    """What `GET /v1/admin/processes` answers, from the merged snapshot families.

    Args:
        merged: :func:`hookline.ingest.metrics.process_families` (what /metrics exposes).

    Returns:
        `supervised`: a running supervisor's figures are there (False when ingest runs
        without `hookline serve`, or its supervisor is gone: `children` is then empty);
        `children`: kind -> {"wanted", "alive"} process counts; `restarts`: every unexpected
        exit the supervisor respawned, all slots and causes; `clock_steps`: wall-clock steps
        it saw; `processes`: one row per slot that runs or was restarted, supervisor and
        ingest first: `running` (its figures are from a live process), `cpu_s` (user +
        system CPU of the current process, seconds), `resident_memory_bytes`, `started_at`
        (unix seconds), `heartbeat_age_s` (seconds since its last heartbeat; null for the
        supervisor and unwatched slots) and `restarts` (cause -> count, causes as in
        `hookline_child_restarts_total`). Figures a process has not reported are null.
    """
    def series(family_name: str) -> Mapping[Labels, Any]:
        return merged.get(family_name, {})

    wanted, alive = series(CHILDREN_WANTED.name), series(CHILDREN_ALIVE.name)
    children = {kind: {"wanted": int(wanted.get((kind,), 0)), "alive": int(alive.get((kind,), 0))}
                for kind in sorted({k for (k,) in (*wanted, *alive)})}
    rows: dict[str, dict[str, Any]] = {}

    def row(slot: str) -> dict[str, Any]:
        if slot not in rows:
            rows[slot] = {"slot": slot, "running": False, "cpu_s": None,
                          "resident_memory_bytes": None, "started_at": None,
                          "heartbeat_age_s": None, "restarts": {}}
        return rows[slot]

    for key, family in _PROCESS_FIGURES:
        for (slot,), value in series(family.name).items():
            row(slot).update({key: value, "running": True})
    for (slot,), age_s in series(HEARTBEAT_AGE_SECONDS.name).items():
        row(slot)["heartbeat_age_s"] = age_s
    restarts = 0
    for (slot, cause), count in series(CHILD_RESTARTS.name).items():
        row(slot)["restarts"][cause] = int(count)
        restarts += int(count)
    return {"supervised": bool(children), "children": children, "restarts": restarts,
            "clock_steps": int(series(CLOCK_STEPS.name).get((), 0)),
            "processes": [rows[slot] for slot in sorted(rows, key=_slot_order)]}
