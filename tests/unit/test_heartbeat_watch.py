"""A heartbeat's age is measured on the supervisor's monotonic clock from when its file's mtime
last changed: an mtime stamped an hour off (a wall-clock step) is still a fresh heartbeat, and
an unchanged or missing file ages."""

from __future__ import annotations

import os

from hookline.supervisor.heartbeat_watch import HeartbeatWatch


def test_age_counts_from_the_last_change_whatever_the_mtime(tmp_path):
    beat = tmp_path / "worker-1.heartbeat"
    beat.touch()
    watch = HeartbeatWatch(str(beat), seen_at=100.0)
    assert watch.age_s(100.0) == 0.0  # the mtime at spawn is the baseline
    assert watch.age_s(130.0) == 30.0  # unchanged: it ages on the monotonic clock
    written = os.stat(beat).st_mtime
    for now, step_s in ((131.0, 3600.0), (150.0, -3600.0)):  # a child's wall clock stepped
        os.utime(beat, (written + step_s, written + step_s))
        assert watch.age_s(now) == 0.0  # a change, forward or back, is a heartbeat
    assert watch.age_s(160.0) == 10.0

def test_a_missing_file_is_no_heartbeat(tmp_path):
    watch = HeartbeatWatch(str(tmp_path / "gone.heartbeat"), seen_at=5.0)
    assert watch.age_s(65.0) == 60.0
