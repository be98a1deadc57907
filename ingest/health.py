"""`GET /healthz` (is the process up?) and `GET /readyz` (may a load balancer send events here?).

`/healthz` never touches the database and is always 200, since restarting ingest would not
help: `{"status": "ok"}`, or `{"status": "degraded", ...}` while the store's own health is
degraded (:meth:`hookline.shared.store.Store.health`: the SQLite WAL past wal_degraded_bytes).

Ready means able to serve, all of:

* POST /v1/events can accept events: an `ingest_token` is set, or `ingest_closed` says it is
  closed on purpose (:func:`hookline.shared.config.ingest_not_ready_reason`);
* the database takes writes (:meth:`hookline.shared.store.Store.check_writable`, bounded by
  `_PROBE_TIMEOUT_S`);
* ingest's own commits are not failing: after a commit failed or timed out (ingest/batcher.py)
  this process is not ready until a write on its store succeeds again while no commit is
  stuck (the probe above, or the next commit), so a probe on a fresh connection can never
  report ready while the events themselves cannot be committed;
* with `ingest_writer = process`, the writer process answers an empty batch within
  `_PROBE_TIMEOUT_S` after checking that its own store takes writes (ingest/writer_link.py),
  and a failed commit is forgiven only once it does;
* at least one worker is alive and heartbeating, per the supervisor's `status.json` in the
  runtime folder (:mod:`hookline.shared.process.lifecycle`), and the supervisor is not stopping;
* this ingest process is not draining for shutdown.

The answer is 200 `{"ready": true, "checks": {...}}` or 503 `{"error": "not_ready",
"detail": "...", "checks": {...}}`. Ingest run on its own (no supervisor, so no status file)
is not ready: nothing would deliver what it accepts.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from hookline.ingest.app_state import COMMITTER_KEY, CONFIG_KEY, IN_FLIGHT_KEY, STORE_KEY
from hookline.shared.config import ingest_not_ready_reason
from hookline.shared.errors import StoreError
from hookline.shared.process.lifecycle import STATUS_FILE, read_status, runtime_dir

_PROBE_TIMEOUT_S = 2.0


def register(app: web.Application) -> None:
    """Add `GET /healthz` and `GET /readyz` to the ingest app."""
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)


async def healthz(request: web.Request) -> web.Response:
    """`GET /healthz`: the process is up and serving (does not touch the database): always
    200, since restarting ingest would not help. The body is `{"status": "ok"}` (with
    `"checks": {"wal": ...}` where the store keeps a WAL file), or `{"status": "degraded",
    "detail": ..., "checks": {"wal": ...}}` while the store's health is degraded
    (:meth:`hookline.shared.store.Store.health`: size, limit, checkpoint result, holders)."""
    found = await request.app[STORE_KEY].health()
    if found.wal_check is None:
        return web.json_response({"status": "ok"})
    checks = {"wal": found.wal_check}
    if not found.degraded:
        return web.json_response({"status": "ok", "checks": checks})
    return web.json_response({"status": "degraded", "detail": found.detail, "checks": checks})


async def readyz(request: web.Request) -> web.Response:
    """`GET /readyz`: 200 when ready, else 503 with the failing checks (module docstring)."""
    problems, checks = await readiness(request.app)
    if problems:
        return web.json_response({"error": "not_ready", "detail": "; ".join(problems),
                                  "checks": checks}, status=503)
    return web.json_response({"ready": True, "checks": checks})


async def readiness(app: web.Application) -> tuple[list[str], dict[str, Any]]:
    """The readiness checks (module docstring), also behind /metrics' `hookline_ready`.

    Returns:
        (the problems, empty when ready; the `checks` object of the /readyz answer).
    """
    checks: dict[str, Any] = {}
    problems: list[str] = []
    if app[IN_FLIGHT_KEY].draining:
        problems.append("ingest is shutting down")
    checks["shutting_down"] = app[IN_FLIGHT_KEY].draining
    config = app[CONFIG_KEY]
    unable = ingest_not_ready_reason(config)
    checks["ingest"] = ("closed on purpose (ingest_closed)" if config.ingest_closed
                        else "open" if unable is None else "no ingest_token")
    if unable is not None:
        problems.append(unable)
    try:
        await asyncio.wait_for(app[STORE_KEY].check_writable(), _PROBE_TIMEOUT_S)
        checks["database"] = "writable"
    except (StoreError, TimeoutError) as exc:
        # A timeout's own text is empty: say what it means.
        checks["database"] = "not writable: " + (
            str(exc) or f"no answer within {_PROBE_TIMEOUT_S:g} s (is the database up and "
                        "reachable from this host?)")
        problems.append("database is not writable")
    committer = app[COMMITTER_KEY]
    if committer.writer is not None:  # ingest_writer = process: the commits are its
        try:
            await asyncio.wait_for(committer.writer.probe(), _PROBE_TIMEOUT_S)
            checks["ingest_writer"] = "answers"
        except (StoreError, TimeoutError) as exc:
            checks["ingest_writer"] = "away: " + (
                str(exc) or f"no answer within {_PROBE_TIMEOUT_S:g} s (is it stopped or hung?)")
            problems.append("the ingest writer process is away")
    if (committer.failing_since is not None and checks["database"] == "writable"
            and checks.get("ingest_writer", "answers") == "answers"
            and not committer.writing):
        committer.recovered()  # a write on the same store succeeded, and no commit is stuck
    if committer.failing_since is None:
        checks["commits"] = "ok"
    else:
        checks["commits"] = (f"failing for {time.monotonic() - committer.failing_since:.0f} s: "
                             f"{committer.last_error}")
        problems.append("ingest's commits are failing")
    status = read_status(runtime_dir(config) / STATUS_FILE)
    if status is None:
        checks["workers"] = "unknown: no supervisor status"
        problems.append("no supervisor status")
    else:
        checks["workers"] = {key: status.get(key) for key in
                             ("workers_wanted", "workers_alive", "workers_healthy")}
        if status.get("stopping"):
            checks["shutting_down"] = True
            problems.append("the supervisor is stopping")
        if not status.get("workers_healthy"):
            problems.append("no live worker")
    return problems, checks
