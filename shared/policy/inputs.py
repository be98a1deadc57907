"""The rule book for input that is not a destination, source or retention setting (those are
in shared/policy/rules.py): event ids, types and source names, job statuses, the operator's
selections (limits, times, reasons, flags), and the one :func:`refuse_unknown` every
object-shaped input goes through.

Pure functions that check one value each and raise :class:`hookline.shared.errors.InvalidInput` (or
the subclass the caller passes, such as :class:`hookline.shared.errors.InvalidEvent` for ingest)
naming the field. Ingest, the admin API, the CLI and the store call these same functions, so
one bad value gets one message wherever it is typed.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Collection, Iterable, Iterator
from typing import Any, cast

from hookline.shared.errors import ConfigError, InvalidInput
from hookline.shared.models import JOB_STATUSES, JobStatus
from hookline.shared.timeparse import InstantSpec, parse_instant_spec

EVENT_ID_RE = re.compile(r"[A-Za-z0-9_:-]{1,128}")
"""An event id. No `.`: Standard Webhooks ids must not contain one, and ids are built from it."""
EVENT_TYPE_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
"""An event type: a strict token (no spaces or control characters), dots allowed."""
SOURCE_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A source name: a URL path segment and the events' `source`, as in POST /v1/events."""
RESERVED_SOURCE_PREFIX = "_"
"""Sources hookline makes itself start with it (`_test`: test deliveries, `_hookline`:
operational events); no publisher or provider source may, or tenants could be shown a
publisher's event as one of hookline's."""

MAX_NAMED_UNKNOWN = 5
"""Most unknown field names one error lists (they are the client's, so the list is capped)."""
MAX_ECHO_CHARS = 40
"""A client-chosen name is cut to this many characters when an error repeats it."""
MAX_ID = 2**63 - 1
"""Largest event or job id (a signed 64-bit integer in both backends)."""
MAX_REASON_CHARS = 1000
"""Longest `reason` an operator action takes (it goes into the audit line)."""
MAX_LIST_LIMIT = 10_000
"""Most rows one listing returns (the admin API's `limit=`, the CLI's `--limit`)."""
MAX_JSON_DEPTH = 64
"""Deepest JSON nesting any input document may have; the top-level value is level 1."""


def clip(name: str) -> str:
    """A client-chosen name as it may appear in an error: cut to MAX_ECHO_CHARS characters."""
    return name if len(name) <= MAX_ECHO_CHARS else name[:MAX_ECHO_CHARS - 1] + "…"


def refuse_unknown(fields: Iterable[str], allowed: Collection[str], *,
                   error: type[InvalidInput] = InvalidInput, what: str = "field",
                   hint: str = "") -> None:
    """Refuse any of `fields` that is not in `allowed`.

    Args:
        fields: the names given (an object's keys, a change set's fields).
        allowed: the names accepted.
        error: the InvalidInput subclass to raise (InvalidEvent for ingest's bodies).
        what: what a name is called in the message (`field`, `key`).
        hint: text appended to the message (e.g. where a refused field is changed instead).

    Raises:
        InvalidInput: (or `error`) naming the first unknown name, sorted; the message lists
            up to MAX_NAMED_UNKNOWN of them and every accepted one.
    """
    unknown = sorted(set(fields) - set(allowed))
    if not unknown:
        return
    shown = ", ".join(repr(clip(name)) for name in unknown[:MAX_NAMED_UNKNOWN])
    more = (f" and {len(unknown) - MAX_NAMED_UNKNOWN} more"
            if len(unknown) > MAX_NAMED_UNKNOWN else "")
    accepted = ", ".join(sorted(allowed)) or "none"
    raise error(clip(unknown[0]), f"unknown {what}(s) {shown}{more}; accepted: "
                                  f"{accepted}{hint}")


def token(field: str, value: Any, pattern: re.Pattern[str], *,
          error: type[InvalidInput] = InvalidInput) -> str:
    """A string matching `pattern` whole (an event id, type or source name: a character class
    and a length, `[...]{m,n}`). The value is never echoed: it may be huge or hold control
    characters; the message names the first character refused by its position and code
    point (and itself when it is printable ASCII). Raises `error`(field)."""
    if not isinstance(value, str):
        raise error(field, f"must be a string, not {json_kind(value)}")
    if pattern.fullmatch(value) is None:
        raise error(field, f"must match {pattern.pattern} ({_why_not(value, pattern)})")
    return value


def _why_not(value: str, pattern: re.Pattern[str]) -> str:
    """Which part of `pattern` (`[...]{m,n}`) `value` fails: its first refused character, or
    its length."""
    allowed = re.compile(pattern.pattern.rsplit("{", 1)[0])
    for position, char in enumerate(value, start=1):
        if allowed.fullmatch(char) is None:
            shown = f" {char!r}" if " " <= char <= "~" else ""
            return f"character {position}, U+{ord(char):04X}{shown}, is not allowed"
    return f"got {len(value)} characters"


def json_kind(value: Any) -> str:
    """JSON's name for the kind of a parsed value, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def job_status(field: str, value: Any,
               allowed: tuple[JobStatus, ...] = JOB_STATUSES) -> JobStatus | None:
    """None, or one of `allowed` (default: every job status). Raises InvalidInput(field)."""
    if value is not None and value not in allowed:
        raise InvalidInput(field, f"must be one of {', '.join(allowed)}, not "
                                  f"{clip(str(value))!r}")
    return cast("JobStatus | None", value)


def whole_number(field: str, value: Any, *, default: int | None = None, low: int = 1,
                 high: int = MAX_ID) -> int:
    """A JSON integer or query text as an int from `low` to `high`; `default` when None
    (required when there is no default). Raises InvalidInput(field)."""
    if value is None:
        if default is None:
            raise InvalidInput(field, "is required")
        return default
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise InvalidInput(field, "must be an integer")
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float
        raise InvalidInput(field, f"must be an integer, not {str(value)[:40]!r}") from None
    if not low <= number <= high:
        raise InvalidInput(field, f"must be from {low} to {high}")
    return number


def list_limit(value: Any, default: int) -> int:
    """A listing's `limit`: how many rows, 1 to MAX_LIST_LIMIT; `default` when None.
    Raises InvalidInput("limit")."""
    return whole_number("limit", value, default=default, high=MAX_LIST_LIMIT)


def page_before(value: Any) -> int | None:
    """A listing's `before` cursor: None for the first (newest) page, else the row id the
    next page starts below. Raises InvalidInput("before")."""
    return None if value is None else whole_number("before", value)


def flag(field: str, value: Any, default: bool = False) -> bool:
    """true or false; `default` when None. Raises InvalidInput(field)."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidInput(field, "must be a boolean")
    return value


def optional_text(field: str, value: Any, max_chars: int = MAX_REASON_CHARS) -> str | None:
    """None, or a string of at most `max_chars` characters. Raises InvalidInput(field)."""
    if value is not None and (not isinstance(value, str) or len(value) > max_chars):
        raise InvalidInput(field, f"must be a string of at most {max_chars} characters")
    return value


def required_name(field: str, value: Any, what: str = "a destination's name") -> str:
    """A non-empty string (a name looked up later). Raises InvalidInput(field)."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, f"is required ({what})")
    return value


def instant(field: str, value: Any) -> InstantSpec | None:
    """None, or a time (unix seconds, ISO 8601, or an age like `2h` resolved later against
    the store's clock). Raises InvalidInput(field)."""
    if value is None:
        return None
    try:
        return parse_instant_spec(value)
    except ConfigError as exc:
        raise InvalidInput(field, str(exc)) from None


def time_range(since_s: float | None, until_s: float | None, *,
               fields: tuple[str, str] = ("since", "until")) -> None:
    """Finite instants (unix seconds), the end after the start. Raises InvalidInput naming
    the bad end."""
    for name, value in zip(fields, (since_s, until_s), strict=True):
        if value is not None and not math.isfinite(value):
            raise InvalidInput(name, "must be a finite time")
    if since_s is not None and until_s is not None and until_s <= since_s:
        raise InvalidInput(fields[1], f"must be after {fields[0]}")


def long_integer_problem(exc: ValueError) -> str | None:
    """The refusal of a JSON integer longer than Python converts (4,300 digits by default),
    in our words rather than the interpreter's advice to raise its limit; None for any
    other ValueError."""
    if "integer string conversion" not in str(exc):
        return None
    return (f"holds an integer of more than {sys.get_int_max_str_digits():,} digits "
            "(send a number that long as a string)")


def json_document(field: str, raw: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse one JSON document an operator or client sent (an admin or tenant API body, a
    file given to the CLI) and refuse what would fail later, deep inside the service.

    Args:
        field: the name the error gives (`body`, or the CLI option).
        raw: the document; bytes must be UTF-8.
        max_depth: the deepest nesting accepted (levels; the top-level value is level 1).

    Returns:
        The parsed value.

    Raises:
        InvalidInput: `field` is not valid UTF-8 or JSON, nests deeper than `max_depth`
            (checked without recursion), or holds a string that cannot be stored as UTF-8
            (a lone surrogate escape such as `\\ud800`).
    """
    try:
        value = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise InvalidInput(field, f"is not valid UTF-8 (byte {exc.start})") from None
    except RecursionError:
        # The C decoder recurses per level and stops at the interpreter's recursion limit,
        # long before a stack overflow; anything that deep is far past max_depth anyway.
        raise InvalidInput(field, f"is nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise InvalidInput(field, long_integer_problem(exc)
                           or f"is not valid JSON: {exc}") from None
    if (problem := json_problem(value, max_depth)) is not None:
        raise InvalidInput(field, problem)
    return value


def json_problem(value: Any, max_depth: int = MAX_JSON_DEPTH, *,
                 check_text: bool = True) -> str | None:
    """What makes a parsed JSON value unfit to keep (None: nothing): nesting deeper than
    `max_depth` levels, or (`check_text`) a key or string that is not encodable as UTF-8
    (JSON's `\\u` escapes can spell a lone surrogate, which no database column can hold;
    a published event's body is stored as its bytes, so ingest checks the depth only). An
    iterative walk, so any depth is safe."""
    stack: list[tuple[Iterator[Any], int]] = []
    if isinstance(value, dict | list):
        stack.append((_json_children(value, check_text), 1))
    elif check_text and isinstance(value, str):
        return _text_problem(value)
    while stack:
        children, depth = stack[-1]
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > max_depth:
                    return f"is nested deeper than {max_depth} levels"
                stack.append((_json_children(child, check_text), depth + 1))
                break
            if (check_text and isinstance(child, str)
                    and (problem := _text_problem(child)) is not None):
                return problem
        else:
            stack.pop()
    return None


def _json_children(container: dict[str, Any] | list[Any], with_keys: bool) -> Iterator[Any]:
    """A container's members (an object's keys first, when `with_keys`, then its values)."""
    if isinstance(container, dict):
        return iter([*container.keys(), *container.values()]) if with_keys \
            else iter(container.values())
    return iter(container)


def _text_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"holds a string that is not valid Unicode (a lone surrogate "
                f"\\u{ord(text[exc.start]):04x}); send text as UTF-8")
    return None
