"""structlog set-up: one JSON object per line on stdout, with stable event names.

Every process calls :func:`configure_logging` once at start. Lines carry `ts` (ISO 8601 UTC),
`level`, `event` (a stable name such as `job_claimed`), `process` (the slot,
e.g. `worker-2`) and `pid`, plus ids given as keyword arguments at the call site.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any, TextIO, cast

import structlog
from structlog.typing import EventDict

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


def configure_logging(process: str, level: str = "info", stream: Any = None,
                      log_file: str | None = None) -> None:
    """Route structlog to JSON lines on `stream` (default stdout).

    Args:
        process: slot name of this process, e.g. `ingest`, `worker-1`, `supervisor`, `cli`.
        level: minimum level, one of debug, info, warning, error.
        stream: a text file object; stdout when None (journald collects it under systemd).
        log_file: also append each line to this file, reopened when it is rotated away
            (see :class:`ReopeningFile`); None for none.

    Raises:
        ValueError: `level` is not a known level name.
    """
    if level not in _LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {sorted(_LEVELS)}")
    # sys.stdout / sys.stderr are looked up at each write, not now: whoever replaces them
    # later (a test's capture, a daemon's redirect) gets the lines, and a closed one is
    # never written to.
    out = (_Standard("stderr") if stream is sys.stderr
           else _Standard("stdout") if stream is None or stream is sys.stdout else stream)
    global _least_level, _process  # noqa: PLW0603  (one setting per process, like structlog's own)
    _least_level = _LEVELS[level]
    _process = process
    structlog.reset_defaults()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            stamp_iso_utc,
            structlog.processors.format_exc_info,
            render_json,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        # WriteLogger writes "line\n" in one call then flushes: processes sharing one output
        # file (children inherit the supervisor's stdout) never interleave within a line.
        # One WriteLogger for every line: a module's logger proxy asks the factory on each
        # call, and a new WriteLogger per line would cost a lock lookup each time.
        logger_factory=_SharedLogger(structlog.WriteLogger(
            # structlog calls only write() and flush(), which _Tee and _Standard have.
            file=cast(TextIO, _Tee(out, ReopeningFile(log_file)) if log_file else out))),
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(process=process, pid=os.getpid())


_process = "hookline"


def process_label() -> str:
    """This process in a few words for another system to show, e.g. PostgreSQL's
    `application_name`: `hookline worker-2 4242` (its slot name, as its log lines' `process`,
    and its pid), or `hookline 4242` before logging is configured."""
    slot = "" if _process == "hookline" else f" {_process}"
    return f"hookline{slot} {os.getpid()}"


_stamp: tuple[int, str] = (-1, "")
"""(unix second, its `YYYY-MM-DDTHH:MM:SS` text): replaced whole, so a thread never pairs one
second's text with another's fraction."""


def stamp_iso_utc(_logger: Any, _name: str, event_dict: EventDict) -> EventDict:
    """Add `ts`, the time now in ISO 8601 UTC with microseconds, exactly as structlog's
    `TimeStamper(fmt="iso", utc=True)` writes it (`2026-01-02T03:04:05.123456Z`; no
    fraction at a whole second), with the date and time formatted once per second."""
    global _stamp  # noqa: PLW0603  (a per-process cache)
    second, nanos = divmod(time.time_ns(), 1_000_000_000)
    stamp = _stamp
    if stamp[0] != second:
        stamp = _stamp = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    micros = nanos // 1000
    event_dict["ts"] = f"{stamp[1]}.{micros:06d}Z" if micros else f"{stamp[1]}Z"
    return event_dict


def _json_fallback(value: Any) -> Any:
    """What structlog's JSONRenderer writes for a value JSON lacks: its `__structlog__()`,
    else its repr."""
    try:
        return value.__structlog__()
    except AttributeError:
        return repr(value)


# One encoder for every line (json.dumps with `default` would build one per call).
_encode_json = json.JSONEncoder(default=_json_fallback).encode


def render_json(_logger: Any, _name: str, event_dict: EventDict) -> str:
    """The line: `event_dict` as JSON, keys in their order (as structlog's JSONRenderer)."""
    return _encode_json(event_dict)


class _SharedLogger:
    """A structlog logger factory that hands out the same logger every time."""

    def __init__(self, logger: structlog.WriteLogger) -> None:
        self._logger = logger

    def __call__(self, *_args: Any) -> structlog.WriteLogger:
        return self._logger


class _Standard:
    """sys.stdout or sys.stderr, whichever object it is at the time of each write."""

    def __init__(self, name: str) -> None:
        self._name = name

    def write(self, text: str) -> int:
        """Write `text` to the current sys.<name>."""
        return int(getattr(sys, self._name).write(text))

    def flush(self) -> None:
        """Flush the current sys.<name>."""
        getattr(sys, self._name).flush()


_least_level = 0
"""The least level configure_logging lets through (0: every level, before it is called)."""


def logs_info() -> bool:
    """Whether info lines are written: a hot path asks before building a line's fields."""
    return _least_level <= _LEVELS["info"]


def logs_debug() -> bool:
    """Whether debug lines are written (see :func:`logs_info`)."""
    return _least_level <= _LEVELS["debug"]


def get_logger(**bound: Any) -> Any:
    """Return a structlog logger with `bound` key/values on every line."""
    return structlog.get_logger(**bound)


class ReopeningFile:
    """An append-only log file that follows rotation, like logging's WatchedFileHandler.

    Every process of the service appends whole lines with one `O_APPEND` write each, so lines
    from several processes never interleave. Before each write the path is checked (at most
    every `check_interval_s`): once it names another file (rotated by
    :func:`rotate_log_file` or logrotate) or none, the file is reopened. A write that fails
    is dropped silently: stdout still carries the line, and logging must not kill a process.

    Args:
        path: the log file; created (mode 0640) when missing.
        check_interval_s: how often, at most, to look for a rotation, in seconds.
    """

    def __init__(self, path: str, check_interval_s: float = 0.5) -> None:
        self.path = path
        self._check_interval_s = check_interval_s
        self._fd = -1
        self._ino: tuple[int, int] | None = None
        self._checked_at = 0.0
        self._buffer = ""

    def write(self, text: str) -> int:
        """Buffer `text`; write out every complete line."""
        self._buffer += text
        if "\n" in self._buffer:
            lines, _, self._buffer = self._buffer.rpartition("\n")
            self._write_out((lines + "\n").encode())
        return len(text)

    def flush(self) -> None:
        """Lines are written as soon as complete; nothing else is buffered."""

    def _write_out(self, data: bytes) -> None:
        try:
            self._reopen_if_rotated()
            os.write(self._fd, data)
        except OSError:
            self.close()

    def _reopen_if_rotated(self) -> None:
        now = time.monotonic()
        if self._fd >= 0 and now - self._checked_at < self._check_interval_s:
            return
        self._checked_at = now
        try:
            st = os.stat(self.path)
            current: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            current = None
        if self._fd >= 0 and current == self._ino:
            return
        self.close()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                           0o600)
        st = os.fstat(self._fd)
        self._ino = (st.st_dev, st.st_ino)

    def close(self) -> None:
        """Close the file descriptor (the next write reopens it)."""
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = -1
        self._ino = None


class _Tee:
    """A text stream writing to two others (stdout and the log file)."""

    def __init__(self, first: Any, second: Any) -> None:
        self._streams = (first, second)

    def write(self, text: str) -> int:
        for stream in self._streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self._streams:
            stream.flush()


def rotate_log_file(path: str, max_bytes: int, backups: int) -> bool:
    """Rotate `path` once it is larger than `max_bytes`: LOG -> LOG.1 -> ... -> LOG.<backups>.

    Only the supervisor calls this, so one process rotates; every writer notices the new
    file through :class:`ReopeningFile`. With `backups` 0 the file is truncated instead.

    Args:
        path: the log file.
        max_bytes: size above which to rotate, in bytes.
        backups: rotated files to keep.

    Returns:
        True when the file was rotated.

    Raises:
        OSError: the folder is not writable.
    """
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return False
    if size <= max_bytes:
        return False
    if backups <= 0:
        os.truncate(path, 0)
        return True
    for n in range(backups - 1, 0, -1):
        older = f"{path}.{n}"
        if os.path.exists(older):
            os.replace(older, f"{path}.{n + 1}")
    os.replace(path, f"{path}.1")
    return True
