"""The rules of single `Config` settings (shared/config.py declares each field's rule beside
it): small checks that raise :class:`hookline.shared.errors.InvalidSetting` naming the setting, as
the rule book's other rules do (shared/policy/rules.py)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from hookline.shared.errors import ConfigError, InvalidSetting
from hookline.shared.policy.rules import retention_age

Check = Callable[[str, Any], None]
"""A setting's rule: called with the field name and its value (never None: an unset optional
setting is not checked); raises InvalidSetting naming the field."""


def at_least(low: int) -> Check:
    def check(name: str, value: Any) -> None:
        if not value >= low:
            raise InvalidSetting(name, f"must be at least {low}, not {value}")
    return check


def above_zero(name: str, value: Any) -> None:
    """A finite number above zero (an infinite lease or interval would mean never)."""
    if not 0 < value < math.inf:
        raise InvalidSetting(name, f"must be a finite number above zero, not {value}")


def finite_or_zero(meaning: str) -> Check:
    """A finite number >= 0, where 0 means `meaning` (`none`, `off`, `skip`)."""
    def check(name: str, value: Any) -> None:
        if not 0 <= value < math.inf:
            raise InvalidSetting(name, f"must be a finite number >= 0 (0 = {meaning}), "
                                       f"not {value}")
    return check


def not_negative(meaning: str) -> Check:
    def check(name: str, value: Any) -> None:
        if not value >= 0:
            raise InvalidSetting(name, f"must not be negative (0 = {meaning}), not {value}")
    return check


def share(name: str, value: Any) -> None:
    """A fraction of a worker's slots: above 0, at most 1."""
    if not 0 < value <= 1:
        raise InvalidSetting(name, f"must be in (0, 1], not {value}")


def one_of(*choices: str) -> Check:
    """One of `choices`, compared without case."""
    def check(name: str, value: Any) -> None:
        if str(value).lower() not in {c.lower() for c in choices}:
            raise InvalidSetting(name, f"must be {', '.join(choices[:-1])} or {choices[-1]}, "
                                       f"not {value!r}")
    return check


def between_zero_and_one(name: str, value: Any) -> None:
    if not 0 <= value <= 1:
        raise InvalidSetting(name, f"must be from 0 to 1 second, not {value}")


def not_blank(name: str, value: Any) -> None:
    if not str(value).strip():
        raise InvalidSetting(name, "must not be empty")


def as_setting(rule: Callable[[Any], object]) -> Check:
    """A parser that raises a bare ConfigError, as a rule naming the field."""
    def check(name: str, value: Any) -> None:
        try:
            rule(value)
        except InvalidSetting:
            raise
        except ConfigError as exc:
            raise InvalidSetting(name, str(exc)) from None
    return check


def retention(name: str, value: Any) -> None:
    retention_age(name, value)


def permanent_codes(text: str) -> frozenset[int]:
    """`permanent_statuses` parsed: comma-separated 4xx codes (blank entries ignored).

    Raises:
        InvalidSetting("permanent_statuses"): an entry that is not a 4xx code.
    """
    codes = set()
    for part in text.split(","):
        if not part.strip():
            continue
        if not part.strip().isdigit() or not 400 <= int(part) <= 499:
            raise InvalidSetting("permanent_statuses", f"must list 4xx codes, not "
                                                       f"{part.strip()!r}")
        codes.add(int(part))
    return frozenset(codes)


def listen_host_port(listen: str) -> tuple[str, int]:
    """Split `HOST:PORT` (IPv6 as `[::1]:8080`). Raises InvalidSetting("listen") when
    malformed."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not host or int(port) > 65535:
        raise InvalidSetting("listen", f"must be HOST:PORT, not {listen!r}")
    return host.strip("[]"), int(port)


# One CSP source expression naming an origin: http(s), a host (DNS name, optionally with a
# leading `*.` for its subdomains, an IPv4 address or a bracketed IPv6 one) and an optional
# port; no path, no quotes, no keyword: nothing that could widen or break the header.
_ORIGIN = re.compile(r"https?://(\*\.)?([A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])"
                     r"(:[0-9]{1,5})?")


def frame_ancestors(text: str) -> tuple[str, ...]:
    """`portal_frame_ancestors` parsed: origins separated by commas or spaces, each
    `http(s)://HOST[:PORT]` (HOST may start with `*.`); blank means none.

    Raises:
        InvalidSetting("portal_frame_ancestors"): an entry that is not such an origin.
    """
    origins = []
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        if _ORIGIN.fullmatch(part.rstrip("/")) is None:
            raise InvalidSetting("portal_frame_ancestors",
                                 f"must list origins like https://app.example.com, not {part!r}")
        origins.append(part.rstrip("/").lower())
    return tuple(origins)


def base_url(name: str, value: Any) -> None:
    """An absolute http(s) URL with a host (a path prefix is kept; no query or fragment)."""
    from urllib.parse import urlsplit  # noqa: PLC0415  (only when the setting is given)

    parts = urlsplit(str(value))
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise InvalidSetting(name, f"must be an http:// or https:// URL with a host and no "
                                   f"query or fragment, not {value!r}")
