"""One rehearsal scenario's world: a database, the receiver fixture, the service, a timeline."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hookline.rehearsal.harness import Service
from hookline.rehearsal.receiver import Endpoint, Receiver, parse_behaviour
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store, open_store

# Fast retries, short leases: drills end in seconds. A config choice, not a code path.
DRILL_SETTINGS = {
    "HOOKLINE_RETRY_BASE_S": "0.2", "HOOKLINE_RETRY_CAP_S": "1.0", "HOOKLINE_MAX_ATTEMPTS": "5",
    "HOOKLINE_LEASE_S": "2", "HOOKLINE_ATTEMPT_TIMEOUT_S": "1.5",
    "HOOKLINE_POLL_INTERVAL_S": "0.2", "HOOKLINE_GRACEFUL_TIMEOUT_S": "2",
    "HOOKLINE_HEARTBEAT_TIMEOUT_S": "30",
}


#: A PostgreSQL server URL (`hookline --db postgresql://… rehearse`): each drill then gets a
#: fresh database on it (`hookline_drill_<scenario>`, recreated) instead of a SQLite file.
POSTGRES_URL: str | None = None


async def fresh_postgres_database(server_url: str, name: str,
                                  prefix: str = "hookline_drill_") -> str:
    """(Re)create database `<prefix><name>` on the server; returns its URL.

    Args:
        server_url: a `postgresql://` URL of any database on the server (connected to).
        name: the database's name after `prefix` (characters outside [a-z0-9_] become _).
        prefix: drills use `hookline_drill_`; the benchmark `hookline_`.

    Raises:
        asyncpg.PostgresError: the server refused (e.g. the user may not create databases).
    """
    import asyncpg  # noqa: PLC0415  (PostgreSQL drills only)

    db_name = prefix + re.sub(r"[^a-z0-9_]", "_", name.lower())
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{db_name}"')
    finally:
        await conn.close()
    return urlsplit(server_url)._replace(path="/" + db_name).geturl()


@dataclass(frozen=True, slots=True)
class Target:
    """A destination played by the receiver: name, behaviour spec, max_in_flight."""

    name: str
    behaviour: str = "ok"
    max_in_flight: int = 10


@dataclass(slots=True)
class Drill:
    """What a scenario works with; `mark` adds a labelled instant to its timeline."""

    directory: Path
    store: Store
    receiver: Receiver
    service: Service
    started: float = field(default_factory=time.time)
    marks: list[tuple[float, str]] = field(default_factory=list)

    def mark(self, label: str) -> None:
        """Record `label` at the current unix time."""
        self.marks.append((time.time(), label))

    def timeline(self) -> list[dict[str, Any]]:
        """Harness marks and the service's job/process log events, in time order."""
        interesting = {"job_claimed", "job_taken_over", "lease_lost", "job_done", "job_dead",
                       "job_retry_scheduled", "job_handed_back", "child_exited",
                       "child_started", "attempt_failed", "parent_gone", "event_accepted"}
        rows = [{"t": round(t - self.started, 3), "source": "drill", "what": label}
                for t, label in self.marks]
        for e in self.service.log_events():
            if e.get("event") in interesting and "t" in e:
                detail: dict[str, Any] = {
                    k: e[k] for k in ("job_id", "slot", "process", "attempt", "signal",
                                      "exit_code", "during", "status", "error")
                    if k in e}
                rows.append({"t": round(e["t"] - self.started, 3), "source": "service",
                             "what": e["event"], **detail})
        return sorted(rows, key=lambda r: r["t"])


@asynccontextmanager
async def drill(directory: Path, targets: Sequence[Target], *, workers: int = 2,
                settings: dict[str, str] | None = None, start: bool = True,
                db_url: str | None = None, service_db: str | None = None,
                crash_event_type: str | None = None) -> AsyncIterator[Drill]:
    """A fresh database with `targets` as destinations, the receiver, and the service.

    `db_url`: an empty database to use instead (e.g. on a server the scenario runs itself).
    `service_db`: the URL the service reaches that same database by, when it differs from
    the drill's own (e.g. through a proxy the scenario cuts off); the drill's store keeps its
    direct way in. `crash_event_type`: the service's workers SIGKILL themselves on events of
    this type (:class:`~hookline.rehearsal.harness.Service`'s hooked service). The service is
    stopped (SIGTERM) and the receiver closed on exit.
    """
    directory.mkdir(parents=True, exist_ok=True)
    secrets = {t.name: generate_secret() for t in targets}
    receiver = Receiver([Endpoint(t.name, secrets[t.name], parse_behaviour(t.behaviour))
                         for t in targets])
    await receiver.start()
    db: Path | str = directory / "drill.db"
    if db_url is not None:
        db = db_url
    elif POSTGRES_URL is not None:
        db = await fresh_postgres_database(POSTGRES_URL, directory.name)
    store = open_store(str(db))
    await store.open()
    service = Service(service_db or db, directory / "service.log", workers=workers,
                      settings={**DRILL_SETTINGS, **(settings or {})},
                      crash_event_type=crash_event_type)
    try:
        for t in targets:
            await store.add_destination(name=t.name, url=receiver.url(t.name),
                                        secret=secrets[t.name], event_types=["*"],
                                        max_in_flight=t.max_in_flight)
        if start:
            await service.start()
        yield Drill(directory=directory, store=store, receiver=receiver, service=service)
    finally:
        service.stop()
        await store.close()
        await receiver.stop()
