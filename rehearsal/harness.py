"""Running hookline for drills: a `hookline serve` process tree, posting, waiting, reading.

Shared by the demo, the rehearsal and the benchmark. Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from hookline.shared.process.spawn import CODE_ROOT, child_import_env
from hookline.shared.store import Store

ROOT = CODE_ROOT
"""The folder holding the `hookline` package: the children's working directory."""

# Drills run on 127.0.0.1 with tokens made up per run, and let destinations reach loopback
# (the SSRF guard refuses it by default).
INGEST_TOKEN = secrets.token_urlsafe(18)
ADMIN_TOKEN = secrets.token_urlsafe(18)
LOCAL_SETTINGS = {"HOOKLINE_INGEST_TOKEN": INGEST_TOKEN, "HOOKLINE_ADMIN_TOKEN": ADMIN_TOKEN,
                  "HOOKLINE_ALLOW_NETWORKS": "127.0.0.0/8"}
INGEST_HEADERS = {"content-type": "application/json", "authorization": f"Bearer {INGEST_TOKEN}"}
ADMIN_HEADERS = {"authorization": f"Bearer {ADMIN_TOKEN}"}


def stop_process(proc: subprocess.Popen[bytes] | None, grace_s: float = 30.0) -> None:
    """SIGTERM `proc` (a child the harness started), wait up to `grace_s` seconds, then
    SIGKILL and reap it; nothing when it is None or has already exited."""
    if proc is not None:
        stop_processes([proc], grace_s)


def stop_processes(procs: Iterable[subprocess.Popen[bytes]], grace_s: float = 30.0) -> None:
    """stop_process for several children at once: each is sent SIGTERM before any is waited
    for, so their shutdowns overlap (a Celery worker's warm shutdown takes about a second);
    each still gets `grace_s` seconds before SIGKILL."""
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class ReceiverNotStarted(RuntimeError):
    """A receiver process ended before it announced its port."""


def start_until_ready(args: Sequence[str], env: dict[str, str], log: Path, within_s: float,
                      what: str) -> subprocess.Popen[bytes]:
    """Start `args` (its stderr to `log`) and return once it printed `{"ready": true}` as
    its first stdout line (left unread past that line); stopped again on failure.

    Raises:
        TimeoutError: no line within `within_s` seconds.
        RuntimeError: it ended, or printed something else, first (the end of its log says
            why).
    """
    with log.open("wb") as stderr:
        proc = subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=stderr, env=env)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], within_s)
        if not ready:
            raise TimeoutError(f"{what} did not serve within {within_s:g} s")
        line = proc.stdout.readline()
        if line.strip() != b'{"ready": true}':
            raise RuntimeError(f"{what} did not say it was ready ({line[:200]!r}): "
                               f"{log.read_text(errors='replace')[-1000:]}")
    except BaseException:
        stop_process(proc, grace_s=10)
        raise
    return proc


@contextlib.contextmanager
def receiver_child(module: str, endpoints: Sequence[str], env: dict[str, str], *,
                   stderr: Any = subprocess.DEVNULL, grace_s: float = 30.0
                   ) -> Iterator[tuple[int, int]]:
    """`python -m MODULE --listen 127.0.0.1:0 --endpoint SPEC ...`: a receiver (the fixture,
    rehearsal/receiver.py, or the lean one, rehearsal/fast_receiver.py; both announce
    `{"port": N, ...}` on their first stdout line) for the block; yields (its pid, its
    port); stopped with stop_process(`grace_s`) on exit.

    Args:
        module: the receiver's module.
        endpoints: `NAME=SECRET:BEHAVIOUR` specs, one per endpoint.
        env: the child's environment.
        stderr: where its log lines go (a file object, or subprocess.DEVNULL).
        grace_s: seconds to wait after SIGTERM before SIGKILL.

    Raises:
        ReceiverNotStarted: it exited before announcing its port.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--listen", "127.0.0.1:0",
         *[arg for spec in endpoints for arg in ("--endpoint", spec)]],
        stdout=subprocess.PIPE, stderr=stderr, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise ReceiverNotStarted(f"the receiver ({module}) did not start")
        yield proc.pid, int(json.loads(line)["port"])
    finally:
        stop_process(proc, grace_s)
        if proc.stdout is not None:
            proc.stdout.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env(settings: dict[str, str] | None = None) -> dict[str, str]:
    """This environment with this checkout importable and `settings` (HOOKLINE_*) applied."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(child_import_env(env))
    return {**env, **(settings or {})}


class Service:
    """`hookline serve` on `db` as a real process tree, logging JSON lines to `log_path`.

    Args:
        db: database file, or a PostgreSQL URL.
        log_path: where the supervisor's and children's stdout go (appended).
        workers: worker processes.
        settings: HOOKLINE_* environment variables, over LOCAL_SETTINGS.
        crash_event_type: None: `hookline serve` itself. An event type: the rehearsal's
            hooked service (rehearsal/hooked_serve.py), whose workers SIGKILL themselves just
            before sending an event of this type (a poison job).
    """

    def __init__(self, db: Path | str, log_path: Path, *, workers: int = 2,
                 settings: dict[str, str] | None = None,
                 crash_event_type: str | None = None) -> None:
        self.db = db
        self.log_path = log_path
        self.workers = workers
        self.settings = {**LOCAL_SETTINGS, **(settings or {})}
        self.crash_event_type = crash_event_type
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self, healthy_timeout_s: float = 20.0) -> None:
        """Start the supervisor and wait until ingest answers /healthz."""
        entry = ["hookline.supervisor.cli"] if self.crash_event_type is None else [
            "hookline.rehearsal.hooked_serve", "--crash-event-type", self.crash_event_type]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", *entry, "--db", str(self.db), "serve",
                 "--workers", str(self.workers), "--listen", f"127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, env=child_env(self.settings), cwd=ROOT)
        await wait_healthy(self.base_url, healthy_timeout_s)

    def children(self) -> dict[str, int]:
        """slot -> pid of the supervisor's live children (read from /proc)."""
        return service_processes(self.proc.pid) if self.proc else {}

    def signal(self, signum: int) -> None:
        """Send `signum` to the supervisor."""
        assert self.proc is not None
        self.proc.send_signal(signum)

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM the supervisor and wait; SIGKILL after `timeout_s`. Returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def log_events(self) -> list[dict[str, Any]]:
        """Every JSON log line written so far, with `t` (unix seconds) added from `ts`."""
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if "ts" in entry:
                    entry["t"] = datetime.fromisoformat(entry["ts"]).timestamp()
                out.append(entry)
        return out


def service_processes(supervisor_pid: int) -> dict[str, int]:
    """slot -> pid of a supervisor's children, by their `--slot` argument, plus itself."""
    found = {"supervisor": supervisor_pid}
    try:
        children = Path(f"/proc/{supervisor_pid}/task/{supervisor_pid}/children").read_text()
    except OSError:
        return found
    for pid in map(int, children.split()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--slot" in argv:
            found[argv[argv.index(b"--slot") + 1].decode()] = pid
    return found


def children_of(pid: int) -> list[int]:
    """Live direct children of `pid` (any process, not only a supervisor's), from /proc."""
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry.name))
    return kids


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def wait_healthy(base_url: str, timeout_s: float = 15.0) -> None:
    """Poll GET /healthz until 200. Raises TimeoutError."""
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(f"{base_url}/healthz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise TimeoutError(f"ingest at {base_url} did not become healthy in {timeout_s} s")


async def post_events(base_url: str, bodies: list[bytes], concurrency: int = 16
                      ) -> Counter[int]:
    """POST each body to /v1/events; returns a count of response statuses."""
    statuses: Counter[int] = Counter()
    queue = list(bodies)

    async def client(session: aiohttp.ClientSession) -> None:
        while queue:
            body = queue.pop()
            async with session.post(f"{base_url}/v1/events", data=body,
                                    headers=INGEST_HEADERS) as resp:
                await resp.read()
                statuses[resp.status] += 1

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
    return statuses


async def wait_settled(store: Store, deadline_s: float) -> dict[str, int]:
    """Wait until no job is pending or running; returns the final counts by status.

    Raises:
        TimeoutError: jobs are still pending or running after `deadline_s` seconds.
    """
    deadline = time.monotonic() + deadline_s
    while True:
        counts = (await store.stats()).jobs_by_status
        if counts["pending"] == 0 and counts["running"] == 0:
            return counts
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs not settled after {deadline_s} s: {counts}")
        await asyncio.sleep(0.1)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write dict rows with a header (an empty file when there are no rows)."""
    with path.open("w", newline="") as fh:
        if rows:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
