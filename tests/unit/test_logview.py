"""`hookline logs` pieces: the pure filter and formatter, the rotating log file, and
following a file across rotation."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from hookline.shared.logs import ReopeningFile, rotate_log_file
from hookline.supervisor.cli.logs import _follow_file
from hookline.supervisor.logview import LogFilter, format_record, parse_line


def rec(event: str, **fields: object) -> dict[str, object]:
    return {"ts": "2025-10-09T12:00:00.000Z", "level": "info", "event": event,
            "process": "worker-1", "pid": 7, **fields}


def test_job_filter_follows_the_job_through_its_event():
    """--job matches job_id, ingest's job_ids list, and (once linked) the job's event lines,
    but not another job of the same event."""
    flt = LogFilter(job_id=5)
    lines = [rec("event_accepted", event_id="ev1", job_ids=[5, 6]),
             rec("job_claimed", job_id=5, event_id="ev1"),
             rec("job_claimed", job_id=6, event_id="ev1"),
             rec("event_duplicate", event_id="ev1"),
             rec("job_done", job_id=50, event_id="ev9")]
    assert [flt.matches(r) for r in lines] == [True, True, False, True, False]


def test_level_since_destination_filters_and_bad_level():
    """--level hides lower levels, --since older lines, --destination other destinations;
    an unknown level is a ValueError."""
    assert not LogFilter(min_level="warning").matches(rec("job_done"))
    assert LogFilter(min_level="warning").matches({**rec("job_dead"), "level": "error"})
    assert not LogFilter(since_s=2e9).matches(rec("job_done"))
    assert not LogFilter(destination="a").matches(rec("job_done", destination="b"))
    with pytest.raises(ValueError, match="unknown level"):
        LogFilter(min_level="loud")


def test_tenant_filter_tells_same_named_destinations_apart():
    """--tenant shows the lines naming that tenant (`"tenant": null` is the default
    tenant's), so with --destination it picks one tenant's `billing` of several; a line
    naming no tenant is not about one."""
    acme, globex = rec("job_done", destination="billing", tenant="acme"), rec(
        "job_done", destination="billing", tenant="globex")
    default, unnamed = rec("destination_paused", destination="billing", tenant=None), rec(
        "ingest_batch")
    both = LogFilter(destination="billing")
    assert [both.matches(r) for r in (acme, globex, default)] == [True, True, True]
    mine = LogFilter(destination="billing", tenant="acme")
    assert [mine.matches(r) for r in (acme, globex, default, unnamed)] == [
        True, False, False, False]
    ours = LogFilter(tenant="_default")
    assert [ours.matches(r) for r in (acme, default, unnamed)] == [False, True, False]


def test_parse_and_format():
    """Non-JSON lines are skipped, a journal prefix is ignored; the human line puts ids first
    and colours only when asked."""
    assert parse_line("Traceback (most recent call last):") is None
    record = parse_line('Oct 09 host hookline[1]: {"event": "x", "job_id": 3}')
    assert record == {"event": "x", "job_id": 3}
    line = format_record(rec("job_done", status=200, job_id=3, reason="a b"))
    assert "worker-1[7]" in line and line.index("job_id=3") < line.index("status=200")
    assert 'reason="a b"' in line and "\x1b[" not in line
    assert "\x1b[" in format_record(rec("job_done"), colour=True)


def test_reopening_file_and_rotation(tmp_path: Path):
    """Writers append whole lines and follow a rotation; rotate_log_file shifts LOG -> LOG.1
    only past max_bytes and keeps `backups` files."""
    path = tmp_path / "h.log"
    out = ReopeningFile(str(path), check_interval_s=0)
    out.write('{"n": 1}')
    out.write("\n")
    assert not rotate_log_file(str(path), 1000, 2)
    assert rotate_log_file(str(path), 3, 2)
    out.write('{"n": 2}\n')
    assert rotate_log_file(str(path), 3, 2)
    out.write('{"n": 3}\n')
    assert rotate_log_file(str(path), 3, 2)
    assert path.with_name("h.log.1").read_text() == '{"n": 3}\n'
    assert path.with_name("h.log.2").read_text() == '{"n": 2}\n'
    assert not path.with_name("h.log.3").exists()
    out.close()


def test_follow_reads_across_rotation(tmp_path: Path):
    """Following a file yields lines appended later, including those written just before a
    rotation and those in the new file after it."""
    path = tmp_path / "f.log"
    path.write_text(json.dumps({"n": 0}) + "\n")
    seen: list[int] = []

    def reader() -> None:
        for line in _follow_file(path):
            seen.append(json.loads(line)["n"])
            if len(seen) == 4:
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    out = ReopeningFile(str(path), check_interval_s=0)
    out.write('{"n": 1}\n')
    time.sleep(0.3)
    out.write('{"n": 2}\n')
    rotate_log_file(str(path), 1, 3)
    out.write('{"n": 3}\n')
    thread.join(10)
    out.close()
    assert seen == [0, 1, 2, 3]
