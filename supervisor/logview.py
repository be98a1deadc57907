"""Pure filtering and formatting of hookline's JSON log lines, for `hookline logs`.

No I/O here: :func:`parse_line` turns one line into a record (or None for a non-JSON line),
:class:`LogFilter` decides whether a record is shown, :func:`format_record` renders it for a
human. A job's story is found through `job_id` (worker lines), `job_ids` (ingest's
`event_accepted`) and, once the job's `event_id` is known, the event's own lines.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import Any

from hookline.shared.models import DEFAULT_TENANT
from hookline.supervisor.cli.human import is_instant_field, iso_time_ms, show

LEVELS = ("debug", "info", "warning", "error", "critical")
_COLOURS = {"debug": "\x1b[2m", "info": "\x1b[32m", "warning": "\x1b[33m",
            "error": "\x1b[31m", "critical": "\x1b[1;31m"}
_RESET = "\x1b[0m"
_DIM = "\x1b[2m"
_CYAN = "\x1b[36m"
# Shown first, in this order, after the event name; the rest follow alphabetically.
_FIRST = ("job_id", "event_id", "destination", "tenant", "attempt", "status", "worker", "slot")
_HEADER = frozenset({"ts", "level", "event", "process", "pid"})


def parse_line(line: str) -> dict[str, Any] | None:
    """Parse one log line; None when it is not a JSON object (tracebacks, blank lines).

    A prefix before the first `{` is ignored, so `journalctl -o short` lines work too.
    """
    start = line.find("{")
    if start < 0:
        return None
    try:
        record = json.loads(line[start:])
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def record_time_s(record: dict[str, Any]) -> float | None:
    """The record's `ts` (ISO 8601) as unix seconds; None when absent or malformed."""
    ts = record.get("ts")
    if not isinstance(ts, str):
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclasses.dataclass(slots=True, kw_only=True)
class LogFilter:
    """Which records to show. Every given criterion must match.

    Attributes:
        job_id: show lines about this job; once a line links it to its event, that event's
            lines too (so `event_accepted` and replays appear). Mutable for that reason.
        event_id: show lines about this event.
        destination: show lines with this destination name.
        tenant: show lines that name this tenant (`"tenant": null` is the default tenant's;
            lines naming no tenant are not shown).
        min_level: lowest level shown (one of :data:`LEVELS`).
        since_s: hide lines older than this, unix seconds.
    """

    job_id: int | None = None
    event_id: str | None = None
    destination: str | None = None
    tenant: str | None = None
    min_level: str = "debug"
    since_s: float | None = None
    _job_events: set[str] = dataclasses.field(default_factory=set)

    def __post_init__(self) -> None:
        if self.min_level not in LEVELS:
            raise ValueError(f"unknown level {self.min_level!r}; use one of {', '.join(LEVELS)}")

    def matches(self, record: dict[str, Any]) -> bool:
        """True when `record` passes every criterion."""
        level = str(record.get("level", "info")).lower()
        if level in LEVELS and LEVELS.index(level) < LEVELS.index(self.min_level):
            return False
        if self.since_s is not None:
            ts = record_time_s(record)
            if ts is not None and ts < self.since_s:
                return False
        if self.destination is not None and record.get("destination") != self.destination:
            return False
        if self.tenant is not None and not self._about_tenant(record, self.tenant):
            return False
        if self.event_id is not None and str(record.get("event_id")) != self.event_id:
            return False
        return self.job_id is None or self._about_job(record, self.job_id)

    @staticmethod
    def _about_tenant(record: dict[str, Any], tenant: str) -> bool:
        if "tenant" not in record:
            return False
        named = record["tenant"]
        return named == tenant or (named is None and tenant == DEFAULT_TENANT)

    def _about_job(self, record: dict[str, Any], job_id: int) -> bool:
        job_ids = record.get("job_ids")
        mine = _same_id(record.get("job_id"), job_id) or (
            isinstance(job_ids, list) and any(_same_id(j, job_id) for j in job_ids))
        event_id = record.get("event_id")
        if mine and event_id is not None:
            self._job_events.add(str(event_id))
        if mine:
            return True
        # A line about the job's event but no job in particular (e.g. event_duplicate).
        return event_id is not None and record.get("job_id") is None \
            and str(event_id) in self._job_events


def _same_id(value: Any, wanted: int) -> bool:
    try:
        return value is not None and int(value) == wanted
    except (TypeError, ValueError):
        return False


def format_record(record: dict[str, Any], *, colour: bool = False) -> str:
    """Render a record as one human line: `time level process[pid] event key=value ...`
    (times as ISO 8601 UTC to the millisecond, other values as in supervisor/cli/human.py).

    Args:
        record: a parsed JSON log line.
        colour: add ANSI colours (for a terminal).

    Returns:
        The line, without a trailing newline.
    """
    level = str(record.get("level", "?")).lower()
    ts = str(record.get("ts", ""))
    when = ts.removesuffix("Z")[:23] + "Z" if ts else "-"  # ISO 8601 UTC, to the ms
    who = f"{record.get('process', '?')}[{record.get('pid', '?')}]"
    event = str(record.get("event", "?"))
    keys = [k for k in _FIRST if k in record]
    keys += sorted(k for k in record if k not in _HEADER and k not in _FIRST)
    fields = " ".join(f"{k}={_value(k, record[k])}" for k in keys)
    if not colour:
        return f"{when} {level:<7} {who:<18} {event:<22} {fields}".rstrip()
    tint = _COLOURS.get(level, "")
    return (f"{_DIM}{when}{_RESET} {tint}{level:<7}{_RESET} {_CYAN}{who:<18}{_RESET} "
            f"\x1b[1m{event:<22}{_RESET} {fields}").rstrip()


def _value(key: str, value: Any) -> str:
    """A field's value for the human line: strings as they are, other values spelled for
    people (instants ISO 8601 UTC, durations in units, None `-`: supervisor/cli/human.py);
    quoted as JSON when it would not read as one `key=value` word."""
    if isinstance(value, str):
        text = value
    elif is_instant_field(key) and isinstance(value, int | float):
        text = iso_time_ms(value)
    else:
        text = show(key, value)
    return text if text and " " not in text and "=" not in text else json.dumps(text)


class HumanLines:
    """A writer that turns the JSON log lines written to it into `format_record` lines on
    `out`: the CLI's own log lines (an operator action's audit line) for a person at a
    terminal. Text that is not a JSON object passes through unchanged."""

    def __init__(self, out: Any, *, colour: bool = False) -> None:
        """`out`: a text stream, looked up as given (pass a wrapper for sys.stderr's current
        value when it may be replaced); `colour`: add ANSI colours."""
        self._out = out
        self._colour = colour
        self._partial = ""

    def write(self, text: str) -> int:
        """Render each complete line of `text`; keep an unfinished one for the next write."""
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            record = parse_line(line)
            self._out.write((line if record is None
                             else format_record(record, colour=self._colour)) + "\n")
        return len(text)

    def flush(self) -> None:
        """Flush `out`."""
        self._out.flush()
