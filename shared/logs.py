"""structlog set-up: one JSON object per line on stdout, with stable event names.

Every process calls :func:`configure_logging` once at start. Lines carry `ts` (ISO 8601 UTC),
`level`, `event` (a stable name such as `job_claimed`; see DESIGN.md), `process` (the slot,
e.g. `worker-2`) and `pid`, plus ids given as keyword arguments at the call site.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


def configure_logging(process: str, level: str = "info", stream: Any = None) -> None:
    """Route structlog to JSON lines on `stream` (default stdout).

    Args:
        process: slot name of this process, e.g. `ingest`, `worker-1`, `supervisor`, `cli`.
        level: minimum level, one of debug, info, warning, error.
        stream: a text file object; stdout when None (journald collects it under systemd).

    Raises:
        ValueError: `level` is not a known level name.
    """
    if level not in _LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {sorted(_LEVELS)}")
    structlog.reset_defaults()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stdout),
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(process=process, pid=os.getpid())


def get_logger(**bound: Any) -> Any:
    """Return a structlog logger with `bound` key/values on every line."""
    return structlog.get_logger(**bound)
