"""Per-thread CPU of a process (rehearsal/bench.py, proc_thread_cpu_s) and the scale
scenarios' split of ingest's CPU into its event loop and its other threads
(rehearsal/scenario_scale.py): read from this test's own process, with a thread that burns
CPU while the main thread waits."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from hookline.rehearsal.bench import proc_thread_cpu_s
from hookline.rehearsal.scenario_scale import thread_split

BURN_S = 0.3


def _burn(seconds: float, burned: threading.Event, release: threading.Event) -> None:
    """Use `seconds` of CPU, then stay alive (idle) until released, so that its CPU can be
    read: an ended thread's is gone from /proc."""
    deadline = time.thread_time() + seconds
    while time.thread_time() < deadline:
        pass
    burned.set()
    release.wait(10)


def test_cpu_a_thread_uses_is_counted_as_another_thread_not_the_event_loop() -> None:
    pid = os.getpid()
    before = proc_thread_cpu_s(pid)
    assert pid in before  # the main thread's id is the process id
    burned, release = threading.Event(), threading.Event()
    burner = threading.Thread(target=_burn, args=(BURN_S, burned, release))
    started = time.thread_time()
    burner.start()
    try:
        assert burned.wait(30)
        after = proc_thread_cpu_s(pid)
        main_used = time.thread_time() - started
    finally:
        release.set()
        burner.join()

    split = thread_split(pid, before, after)

    assert split["other_threads"] >= BURN_S - 0.05  # kernel ticks are 10 ms
    assert split["event_loop"] <= main_used + 0.05  # the waiting main thread used little
    assert split["event_loop"] < split["other_threads"]


def test_a_process_that_is_gone_has_no_threads() -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    assert proc_thread_cpu_s(int(child.stdout)) == {}
