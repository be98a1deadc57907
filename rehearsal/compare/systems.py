"""Start and stop the three systems `hookline bench --compare` measures, as real processes.

Each system is a context manager yielding a :class:`Running`: the URL its front door takes
`POST /v1/events` on, and slot -> pid of every process of the system (their CPU and peak RSS
are what the bench reports). Everything listens on 127.0.0.1 and lives in the run's work
folder; every process is stopped on the way out (SIGTERM, then SIGKILL after a grace period).

- hookline: `hookline serve` (supervisor, ingest, W workers), a fresh SQLite file.
- Celery: a throwaway `redis-server` (AOF on, `appendfsync everysec`, no RDB snapshots), the
  peer front door (rehearsal/compare/peer_ingest.py) and W `celery worker --pool threads
  --concurrency C` processes.
- Huey: the peer front door and W `huey_consumer -k thread -w C` processes on one SQLite file.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hookline.rehearsal.harness import (
    LOCAL_SETTINGS,
    child_env,
    free_port,
    service_processes,
    stop_process,
    stop_processes,
    wait_healthy,
)
from hookline.shared.store import open_store

STOP_GRACE_S = 15.0


class CompareError(Exception):
    """A system of the comparison could not be started or did not finish."""


class CompareUnavailable(CompareError):
    """What `--compare` needs is not installed (the bench extra, redis-server)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Destination:
    """One receiver endpoint: its name, URL and `whsec_` secret."""

    name: str
    url: str
    secret: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Running:
    """A started system: `url` takes POST /v1/events; `pids`: slot -> pid of its processes."""

    url: str
    pids: dict[str, int]


def check_available() -> None:
    """Raise CompareUnavailable, naming the install command, when the bench extra (celery,
    huey, redis, requests) or the redis-server binary is missing."""
    missing = [name for name in ("celery", "huey", "redis", "requests")
               if importlib.util.find_spec(name) is None]
    if missing:
        raise CompareUnavailable(
            f"the bench extra is not installed (missing: {', '.join(missing)}); install it "
            "with `pip install 'hookline[bench]'` (in a checkout, `make venv` does)")
    if shutil.which("redis-server") is None:
        raise CompareUnavailable("redis-server is not installed; on Debian: "
                                 "`apt-get install redis-server` (`make test` does, as root)")


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    """Stop a process of a system under test (hookline.rehearsal.harness.stop_process,
    STOP_GRACE_S)."""
    stop_process(proc, STOP_GRACE_S)


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop a system's processes together (hookline.rehearsal.harness.stop_processes,
    STOP_GRACE_S): their shutdowns overlap."""
    stop_processes(procs, STOP_GRACE_S)


def _spawn(argv: list[str], log_path: Path, env: dict[str, str],
           cwd: Path | None = None) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)


def _wait_until(check: Callable[[], bool], what: str, procs: list[subprocess.Popen[bytes]],
                timeout_s: float = 30.0) -> None:
    """Poll `check()` every 0.1 s until true; CompareError if a process in `procs` exits or
    `timeout_s` seconds pass."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise CompareError(f"{what}: a process exited early (see its log in the run folder)")
        if check():
            return
        time.sleep(0.1)
    raise CompareError(f"{what}: not ready within {timeout_s} s")


def _healthy(url: str, procs: list[subprocess.Popen[bytes]], what: str) -> None:
    try:
        asyncio.run(wait_healthy(url, timeout_s=30))
    except TimeoutError as exc:
        dead = [p.args for p in procs if p.poll() is not None]
        raise CompareError(f"{what} did not become healthy ({dead or exc})") from exc


async def _add_destinations(db: str, destinations: list[Destination], max_in_flight: int
                            ) -> None:
    """Subscribe each destination to every event type, with a `max_in_flight` that never
    binds (the peers have no such limit)."""
    store = open_store(db)
    await store.open()
    try:
        for d in destinations:
            await store.add_destination(name=d.name, url=d.url, secret=d.secret,
                                        event_types=["*"], max_in_flight=max_in_flight)
    finally:
        await store.close()


@contextlib.contextmanager
def hookline(work: Path, destinations: list[Destination], *, workers: int, concurrency: int,
             synchronous: str = "FULL") -> Iterator[Running]:
    """`hookline serve` with `workers` workers of `concurrency` in-flight requests each, on
    a fresh SQLite file (`synchronous` FULL or NORMAL) in `work`."""
    db = str(work / "hookline.db")
    asyncio.run(_add_destinations(db, destinations, workers * concurrency))
    port = free_port()
    env = child_env({**LOCAL_SETTINGS, "HOOKLINE_RUNTIME_DIR": str(work / "run"),
                     "HOOKLINE_PID_FILE": str(work / "hookline.pid"),
                     "HOOKLINE_SYNCHRONOUS": synchronous,
                     "HOOKLINE_WORKER_CONCURRENCY": str(concurrency)})
    service = _spawn([sys.executable, "-m", "hookline.supervisor.cli", "--db", db, "--log-level",
                      "warning", "serve", "--workers", str(workers), "--listen",
                      f"127.0.0.1:{port}"], work / "hookline.log", env)
    try:
        _healthy(f"http://127.0.0.1:{port}", [service], "hookline")
        _wait_until(lambda: len(service_processes(service.pid)) >= 2 + workers,
                    "hookline workers", [service])
        time.sleep(0.5)
        yield Running(url=f"http://127.0.0.1:{port}/v1/events",
                      pids=service_processes(service.pid))
    finally:
        stop(service)


def _peer_env(destinations: list[Destination], **extra: str) -> dict[str, str]:
    dests = [{"name": d.name, "url": d.url, "secret": d.secret} for d in destinations]
    return child_env({"COMPARE_DESTINATIONS": json.dumps(dests), **extra})


@contextlib.contextmanager
def redis_server(work: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A throwaway redis-server on a free 127.0.0.1 port, data in `work/redis`: AOF on with
    `appendfsync everysec` (a crash may lose the last second of accepted tasks), no RDB
    snapshots. Yields (process, redis:// URL); stopped (SIGTERM: it flushes the AOF) after.

    Raises:
        CompareUnavailable: redis-server is not installed.
        CompareError: it did not answer PING within 15 s.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        raise CompareUnavailable("redis-server is not installed; on Debian: "
                                 "`apt-get install redis-server`")
    import redis  # noqa: PLC0415  (the bench extra)

    folder = work / "redis"
    folder.mkdir()
    port = free_port()
    proc = _spawn([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
                   "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
                   "--daemonize", "no", "--protected-mode", "yes"], work / "redis.log",
                  child_env())
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False

    try:
        _wait_until(answers, "redis-server", [proc], timeout_s=15)
        yield proc, url
    finally:
        client.close()
        stop(proc)


@contextlib.contextmanager
def celery(work: Path, destinations: list[Destination], *, workers: int,
           concurrency: int) -> Iterator[Running]:
    """Redis, the peer front door and `workers` Celery worker processes (thread pool of
    `concurrency`); ready once every worker is blocked reading the queue."""
    import redis  # noqa: PLC0415  (the bench extra)

    with redis_server(work) as (redis_proc, url):
        env = _peer_env(destinations, COMPARE_BROKER_URL=url)
        port = free_port()
        procs: list[subprocess.Popen[bytes]] = []
        try:
            procs.append(_spawn([sys.executable, "-m", "hookline.rehearsal.compare.peer_ingest",
                                 "--queue", "celery", "--listen", f"127.0.0.1:{port}"],
                                work / "celery-front.log", env))
            for n in range(1, workers + 1):
                procs.append(_spawn(
                    [sys.executable, "-m", "celery", "-A", "hookline.rehearsal.compare.celery_app",
                     "worker", "--pool", "threads", "--concurrency", str(concurrency),
                     "--hostname", f"w{n}@bench", "--loglevel", "WARNING",
                     "--without-gossip", "--without-mingle", "--without-heartbeat"],
                    work / f"celery-{n}.log", env, cwd=work))
            _healthy(f"http://127.0.0.1:{port}", procs, "the Celery front door")
            client = redis.Redis.from_url(url)
            try:
                _wait_until(lambda: sum(c.get("cmd") == "brpop" for c in client.client_list())
                            >= workers, "Celery workers", procs)
            finally:
                client.close()
            time.sleep(0.5)
            pids = {"front": procs[0].pid, "redis-server": redis_proc.pid}
            pids.update({f"celery-{n}": p.pid for n, p in enumerate(procs[1:], 1)})
            yield Running(url=f"http://127.0.0.1:{port}/v1/events", pids=pids)
        finally:
            stop_all(procs)


def _threads(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@contextlib.contextmanager
def huey(work: Path, destinations: list[Destination], *, workers: int,
         concurrency: int) -> Iterator[Running]:
    """The peer front door (it creates the SQLite file) and `workers` Huey consumer
    processes (`-k thread -w concurrency`) on it; ready once every consumer runs its
    threads."""
    env = _peer_env(destinations, COMPARE_HUEY_DB=str(work / "huey.db"))
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(_spawn([sys.executable, "-m", "hookline.rehearsal.compare.peer_ingest",
                             "--queue", "huey", "--listen", f"127.0.0.1:{port}"],
                            work / "huey-front.log", env))
        _healthy(f"http://127.0.0.1:{port}", procs, "the Huey front door")
        for n in range(1, workers + 1):
            procs.append(_spawn([sys.executable, "-m", "huey.bin.huey_consumer",
                                 "hookline.rehearsal.compare.huey_app.huey", "-k", "thread", "-w",
                                 str(concurrency), "-q"],
                                work / f"huey-{n}.log", env, cwd=work))
        _wait_until(lambda: all(_threads(p.pid) > concurrency for p in procs[1:]),
                    "Huey consumers", procs)
        time.sleep(0.5)
        pids = {"front": procs[0].pid}
        pids.update({f"huey-{n}": p.pid for n, p in enumerate(procs[1:], 1)})
        yield Running(url=f"http://127.0.0.1:{port}/v1/events", pids=pids)
    finally:
        stop_all(procs)
