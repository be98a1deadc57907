"""Operator time inputs: durations like `7d` and instants like `2h` ago, ISO 8601 or unix.

Used by `hookline replay --since`, `hookline purge --bodies-older-than` and the admin API.
An instant compared with stored ones is parsed with :func:`parse_instant_spec` and resolved
against the store's clock (:func:`hookline.shared.store.resolve_instants`), not the wall clock.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from hookline.shared.errors import ConfigError

_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_duration(text: str) -> float:
    """Parse `30s`, `15m`, `2h`, `7d`, `1w` (or plain seconds) into seconds.

    Raises:
        ConfigError: not a non-negative number with an optional unit s, m, h, d or w.
    """
    match = _DURATION.match(text)
    if match:
        return float(match.group(1)) * _UNITS_S[match.group(2)]
    try:
        seconds = float(text)
    except ValueError:
        raise ConfigError(f"not a duration: {text!r} (use e.g. 90s, 15m, 2h, 7d)") from None
    if seconds < 0 or seconds != seconds or seconds == float("inf"):
        raise ConfigError(f"not a duration: {text!r} (must be a finite number >= 0)")
    return seconds


@dataclass(frozen=True, slots=True)
class InstantSpec:
    """A point in time as an operator gave it: unix seconds, or (`ago`) an age in seconds
    before a "now" chosen later, so that "now" can be the clock the compared instants were
    written with."""

    seconds: float
    ago: bool = False

    def resolve(self, now_s: float) -> float:
        """The instant in unix seconds; an age counts back from `now_s` (unix seconds)."""
        return now_s - self.seconds if self.ago else self.seconds


def parse_instant_spec(text: str | float | int) -> InstantSpec:
    """Parse a point in time without resolving it yet (see :func:`parse_instant`).

    Raises:
        ConfigError: not a time, or not a finite number of seconds.
    """
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ConfigError(f"not a time: {text!r}")
    spec = _parse_instant(text)
    if not math.isfinite(spec.seconds):
        raise ConfigError(f"not a time: {text!r} (must be a finite number of seconds)")
    return spec


def parse_instant(text: str | float | int, now_s: float) -> float:
    """Parse a point in time into unix seconds.

    Accepts unix seconds (`1760000000`), ISO 8601 (`2025-10-09T12:00:00Z`; no zone means UTC),
    or a relative duration meaning that long before `now_s` (`2h`, `30m`, `7d`).

    Raises:
        ConfigError: none of those forms (a value of another type included), or not a finite
            number of seconds.
    """
    instant = parse_instant_spec(text).resolve(now_s)
    if not math.isfinite(instant):
        raise ConfigError(f"not a time: {text!r} (must be a finite number of seconds)")
    return instant


def _parse_instant(text: str | float | int) -> InstantSpec:
    if isinstance(text, int | float):
        return InstantSpec(float(text))
    value = text.strip()
    if _DURATION.match(value):
        return InstantSpec(parse_duration(value), ago=True)
    try:
        return InstantSpec(float(value))
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"not a time: {text!r} (use ISO 8601, unix seconds, or a "
                          "relative age like 2h)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return InstantSpec(parsed.timestamp())
