"""A worker's SQLite commits are not synced one by one (`worker_synchronous = NORMAL`): a power
loss may undo the last ones and send their jobs again. A claim that holds an ordered
destination's job or an operational event is synced (the WAL fdatasync'd) before it is
returned, so those are never sent from a commit a power loss could undo; a sync that fails is
a permanent fault, and the claim is not returned.

Real SQLite files, and the OS's real fsync calls: the worker's store runs in a process of its
own (tests/sync_probe.py) under strace, which records every fdatasync of the WAL (and, to
play a failing disk, makes them fail with EIO). The test process holds the database open
with a FULL store of its own, as ingest does, so the WAL is never started afresh under the
worker (SQLite syncs a new WAL's header even at NORMAL)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from hookline.shared.store.sqlite import SqliteStore
from tests.conftest import new_event
from tests.pg import skip_or_fail_in_ci

SECRET = "whsec_" + "A" * 32
URL = "http://127.0.0.1:9/x"
ROOT = Path(__file__).resolve().parents[2]


class TracedWorkerStore:
    """The probe process (tests/sync_probe.py) under strace: send it commands, read the
    WAL fdatasync calls it has made since it was ready."""

    def __init__(self, probe: subprocess.Popen[str], trace: Path, wal: str) -> None:
        self._probe = probe
        self._trace = trace
        self.wal = wal  # the real path of the WAL traced
        self._before = len(self._synced())

    def command(self, line: str) -> dict[str, Any]:
        """One command (see tests/sync_probe.py) and its answer."""
        assert self._probe.stdin is not None and self._probe.stdout is not None
        self._probe.stdin.write(line + "\n")
        self._probe.stdin.flush()
        return _answer(self._probe)

    def syncs(self) -> list[str]:
        """The files of the WAL fdatasync calls made since the probe was ready."""
        return self._synced()[self._before:]

    def _synced(self) -> list[str]:
        # strace writes each call as it returns: `TID fdatasync(FD</path>) = 0`.
        lines = self._trace.read_text().splitlines() if self._trace.exists() else []
        return [line.split("<", 1)[1].split(">", 1)[0] for line in lines
                if "fdatasync(" in line and "<" in line]


def _answer(probe: subprocess.Popen[str]) -> dict[str, Any]:
    """The probe's next JSON line (its log lines, on the same stdout, are passed over)."""
    assert probe.stdout is not None
    while line := probe.stdout.readline():
        if line.startswith("{"):
            answer: dict[str, Any] = json.loads(line)
            return answer
    raise AssertionError(f"the probe ended (exit {probe.wait()})")


@contextlib.contextmanager
def traced_worker_store(db: Path, synchronous: str, trace: Path, *,
                        fail_syncs: bool = False) -> Iterator[TracedWorkerStore]:
    """Run the probe on `db` under strace, tracing the fdatasync calls on the WAL beside the
    database's real path (failing each with EIO when `fail_syncs`)."""
    strace = shutil.which("strace")
    if strace is None:
        skip_or_fail_in_ci("strace is not installed (Debian: apt-get install strace)")
        raise AssertionError("unreachable")
    wal = os.path.realpath(db) + "-wal"
    command = [strace, "-f", "-qq", "-y", "-P", wal, "-e", "trace=fdatasync",
               "-o", str(trace)]
    if fail_syncs:
        command += ["-e", "inject=fdatasync:error=EIO"]
    command += [sys.executable, "-m", "tests.sync_probe", str(db), synchronous]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    probe = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, cwd=ROOT, env=env)
    try:
        assert _answer(probe) == {"ready": True}
        yield TracedWorkerStore(probe, trace, wal)
    finally:
        with contextlib.suppress(BrokenPipeError, OSError):
            assert probe.stdin is not None
            probe.stdin.write("quit\n")
            probe.stdin.close()
        deadline = time.monotonic() + 10
        while probe.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if probe.poll() is None:
            probe.kill()
        probe.wait()
        assert probe.stdout is not None
        probe.stdout.close()


async def _held_open(path: Path) -> SqliteStore:
    """The database with its destinations, held open by a FULL store (as ingest holds it)."""
    store = SqliteStore(str(path))
    await store.open()
    for name, ordered in (("plain", False), ("fifo", True)):
        await store.add_destination(name=name, url=URL, secret=SECRET, event_types=[name],
                                    max_in_flight=10, ordered=ordered)
    return store


@pytest.fixture
async def ingest_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = await _held_open(tmp_path / "worker.db")
    yield store
    await store.close()


async def test_a_plain_claim_is_not_synced_an_ordered_one_is(
        ingest_store: SqliteStore, tmp_path: Path) -> None:
    await ingest_store.add_event(new_event("e1", type_="plain"))
    with traced_worker_store(Path(ingest_store.path), "NORMAL",
                             tmp_path / "trace") as worker:
        assert worker.command("claim") == {"claimed": ["plain"]}
        assert worker.syncs() == []
        await ingest_store.add_event(new_event("e2", type_="fifo"))
        assert worker.command("claim") == {"claimed": ["fifo"]}
        assert worker.syncs() == [worker.wal]


async def test_an_operational_event_is_synced_before_it_is_sent(
        ingest_store: SqliteStore, tmp_path: Path) -> None:
    await ingest_store.add_destination(name="ops", url=URL, secret=SECRET,
                                       event_types=["hookline.*"], max_in_flight=10)
    await ingest_store.add_event(new_event("e1", type_="plain"))
    with traced_worker_store(Path(ingest_store.path), "NORMAL",
                             tmp_path / "trace") as worker:
        assert worker.command("claim") == {"claimed": ["plain"]}
        # The failure makes `hookline.destination.failing` in this commit, not synced; the
        # claim that takes the announcement is.
        assert worker.command("fail") == {"finished": 1}
        assert worker.syncs() == []
        assert worker.command("claim") == {"claimed": ["hookline.destination.failing"]}
        assert len(worker.syncs()) == 1
        assert worker.command("done") == {"finished": 1}
        assert len(worker.syncs()) == 1  # a finish is not synced


async def test_a_store_that_syncs_every_commit_syncs_no_more(
        ingest_store: SqliteStore, tmp_path: Path) -> None:
    await ingest_store.add_event(new_event("e1", type_="fifo"))
    with traced_worker_store(Path(ingest_store.path), "FULL", tmp_path / "trace") as worker:
        assert worker.command("claim") == {"claimed": ["fifo"]}
        assert len(worker.syncs()) == 1  # SQLite's own, at the commit: none after it


async def test_a_symlinked_database_syncs_the_wal_beside_its_real_file(
        tmp_path: Path) -> None:
    # SQLite follows the link and keeps the WAL beside the real file: the sync must too.
    (tmp_path / "data").mkdir()
    real = tmp_path / "data" / "real.db"
    link = tmp_path / "hookline.db"
    link.symlink_to(real)
    store = await _held_open(link)
    try:
        await store.add_event(new_event("e1", type_="fifo"))
        with traced_worker_store(link, "NORMAL", tmp_path / "trace") as worker:
            assert worker.command("claim") == {"claimed": ["fifo"]}
            assert worker.syncs() == [str(real) + "-wal"]
        wals = sorted(f"{folder}/{name}" for folder in (".", "data")
                      for name in os.listdir(tmp_path / folder) if name.endswith("-wal"))
    finally:
        await store.close()
    assert wals == ["data/real.db-wal"]  # none beside the link


async def test_a_failed_sync_is_a_permanent_fault_and_the_claim_is_not_returned(
        ingest_store: SqliteStore, tmp_path: Path) -> None:
    # After a failed fsync the kernel may drop the unwritten pages and report the next sync
    # as a success: retrying would send claims a power loss can undo. The worker stops.
    await ingest_store.add_event(new_event("e1", type_="fifo"))
    with traced_worker_store(Path(ingest_store.path), "NORMAL", tmp_path / "trace",
                             fail_syncs=True) as worker:
        answer = worker.command("claim")
    assert answer["error"].startswith("StoreError: cannot sync the WAL"), answer
    assert "Input/output error" in answer["error"]
    # Committed but never handed to a sender: its lease expires and it is taken over.
    [job] = await ingest_store.list_jobs()
    assert (job.status, job.attempts) == ("running", 1)
