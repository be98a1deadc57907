"""A service child's cycle collector (shared/process/lifecycle.py, tune_garbage_collector): what
boot loaded is frozen out of collections and young collections are rare, in a real child
process started as the supervisor starts one."""

from __future__ import annotations

import json
import subprocess
import sys

from hookline.shared.process.lifecycle import GC_YOUNG_THRESHOLD

PROBE = """
import gc, json
from hookline.shared.process import child
from hookline.shared.process.lifecycle import BOOT_ERROR_EXIT
from hookline.shared.config import Config

seen = {}

async def main(boot):
    seen["threshold"] = gc.get_threshold()[0]
    seen["frozen"] = gc.get_freeze_count()

code = child.run_child(Config(), "probe", lambda boot: main(boot), failed_event="probe_failed")
print(json.dumps({"code": code, **seen}))
"""


def test_a_child_runs_with_boot_frozen_and_a_larger_young_threshold(tmp_path):
    """run_child freezes the thousands of objects the imports made and raises the young
    threshold before the main coroutine runs (Python's defaults: 700, nothing frozen)."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["code"] == 0
    assert seen["threshold"] == GC_YOUNG_THRESHOLD > 700
    assert seen["frozen"] > 10_000
