"""Per-thread CPU of a process (rehearsal/bench.py, proc_thread_cpu_s) and the scale
scenarios' split of ingest's CPU into its event loop and its other threads
(rehearsal/scenario_scale.py): read from this test's own process, with a thread that burns
CPU while the main thread sleeps."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from hookline.rehearsal.bench import proc_thread_cpu_s
from hookline.rehearsal.scenario_scale import _thread_split

BURN_S = 0.3


def _burn(seconds: float) -> None:
    deadline = time.thread_time() + seconds
    while time.thread_time() < deadline:
        pass


def test_cpu_a_thread_uses_is_counted_as_another_thread_not_the_event_loop() -> None:
    pid = os.getpid()
    before = proc_thread_cpu_s(pid)
    assert pid in before  # the main thread's id is the process id
    burner = threading.Thread(target=_burn, args=(BURN_S,))
    burner.start()
    started = time.thread_time()
    # Read while the thread is alive (an ended thread's CPU is gone), keeping each thread's
    # latest reading: the last one may find it ending, its stat file no longer readable.
    after: dict[int, float] = {}
    while burner.is_alive():
        after.update(proc_thread_cpu_s(pid))
        time.sleep(0.01)
    burner.join()
    main_used = time.thread_time() - started

    split = _thread_split(pid, before, after)

    assert split["other_threads"] >= BURN_S * 0.5
    assert split["event_loop"] <= main_used + 0.05  # the sleeping main thread used little
    assert split["event_loop"] < split["other_threads"]


def test_a_process_that_is_gone_has_no_threads() -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    assert proc_thread_cpu_s(int(child.stdout)) == {}
