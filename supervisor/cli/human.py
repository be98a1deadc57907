"""Values for people: how the CLI's human output spells times, durations, sizes, booleans,
lists and mappings (the `--json` output keeps the API's JSON types instead).

A value's meaning comes from its field name, the same convention as shared/views.py:
`*_at`, `*_until`, `*_since` (and `since`, `start_s`) are unix-seconds instants, printed as
ISO 8601 UTC (`2026-12-01T18:03:14Z`); `*_per_s` is a rate (`5/s`); any other `*_s` is a
duration in seconds, printed in human units (`350 ms`, `12.5 s`, `4 min 5 s`, `3 h 12 min`,
`2 d 4 h`); `*_bytes` is a size (`812 B`, `4.0 KiB`, `1.2 MiB`); a `url` shows its password as
`***` (:func:`hookline.shared.db_url.redact_url`). Whatever the name: None and empty values
are `-`, booleans `yes`/`no`, lists comma-separated, mappings `key value, ...`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from hookline.shared.db_url import redact_url

NONE = "-"
"""How a missing value (None, an empty string, list or mapping) is printed."""

_INSTANT_NAMES = frozenset({"since", "start_s", "until"})
_INSTANT_SUFFIXES = ("_at", "_until", "_since")


def is_instant_field(name: str) -> bool:
    """True when a field called `name` holds unix seconds meaning a point in time."""
    return name in _INSTANT_NAMES or name.endswith(_INSTANT_SUFFIXES)


def iso_time(unix_s: float | None) -> str:
    """Unix seconds as ISO 8601 UTC to the second (`2026-12-01T18:03:14Z`); None is `-`."""
    if unix_s is None:
        return NONE
    return datetime.fromtimestamp(unix_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_time_ms(unix_s: float) -> str:
    """Unix seconds as ISO 8601 UTC to the millisecond (`2026-12-01T18:03:14.123Z`)."""
    return datetime.fromtimestamp(unix_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] + "Z"


def duration(seconds: float | None) -> str:
    """A duration in seconds in the largest fitting units: `350 ms`, `12.5 s`, `4 min 5 s`,
    `3 h 12 min`, `2 d 4 h`; None is `-`."""
    if seconds is None or (isinstance(seconds, float) and not math.isfinite(seconds)):
        return NONE
    if seconds < 0:
        return "-" + duration(-seconds)
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.3g} s"
    whole = round(seconds)
    for unit_s, unit, sub_s, sub in ((86400, "d", 3600, "h"), (3600, "h", 60, "min"),
                                     (60, "min", 1, "s")):
        if whole >= unit_s:
            big, rest = divmod(whole, unit_s)
            small = rest // sub_s
            return f"{big} {unit} {small} {sub}" if small else f"{big} {unit}"
    return f"{whole} s"  # not reached: whole >= 60 here


def size(n_bytes: int | None) -> str:
    """A size in bytes: `812 B`, `4.0 KiB`, `1.2 MiB`, `3.4 GiB`; None is `-`."""
    if n_bytes is None:
        return NONE
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # not reached


def number(value: float) -> str:
    """A plain number without float noise: `3`, `0.25`, `1234.5`."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def show(name: str, value: Any) -> str:
    """`value` of the field called `name` as text for people (see the module docstring):
    never a Python repr (`None`, `True`, `['a']`, `{'a': 1}`) or a bare unix float."""
    if value is None or value == "" or (isinstance(value, list | tuple | Mapping)
                                        and not value):
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        if is_instant_field(name):
            return iso_time(value)
        if name.endswith("_per_s"):
            return f"{number(value)}/s"
        if name.endswith("_s"):
            return duration(value)
        if name.endswith("_bytes"):
            return size(int(value))
        return number(value)
    if isinstance(value, Mapping):
        return ", ".join(_entry(name, str(k), v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(" ".join(show(name, part) for part in item)
                         if isinstance(item, list | tuple) else show(name, item)
                         for item in value)
    if name == "url":  # a destination's: its password is a credential
        value = redact_url(str(value))
    return " ".join(str(value).split())  # one line: newlines and tabs become spaces


def _entry(name: str, key: str, value: Any) -> str:
    """One `key value` entry of a mapping; a nested mapping is `key (a 1, b 2)`."""
    if isinstance(value, Mapping):
        return f"{key} ({show(name, value)})"
    return f"{key} {show(key if _has_unit(key) else name, value)}"


def _has_unit(key: str) -> bool:
    return is_instant_field(key) or key.endswith(("_s", "_bytes"))
