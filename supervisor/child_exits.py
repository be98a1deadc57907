"""How the supervisor reads a child's end: the log fields of a `waitpid` status, its
`Popen.returncode`, and how long to wait before respawning a slot that keeps dying."""

from __future__ import annotations

import os
import signal
from typing import Any

from hookline.shared.policy.retry import doubling_s


def respawn_delay_s(consecutive_failures: int, base_s: float, cap_s: float) -> float:
    """Return how long to wait before respawning a slot.

    Args:
        consecutive_failures: deaths of the slot in a row without a stable run; 0 means none.
        base_s: delay after the first failure, in seconds.
        cap_s: upper bound of the delay, in seconds.

    Returns:
        ``min(cap_s, base_s * 2 ** (consecutive_failures - 1))`` seconds; 0.0 for no failure.

    Raises:
        ValueError: `consecutive_failures` is negative.
    """
    if consecutive_failures < 0:
        raise ValueError(f"consecutive_failures must be >= 0, got {consecutive_failures}")
    if consecutive_failures == 0:
        return 0.0
    return doubling_s(consecutive_failures, base_s, cap_s)


def describe_exit(status: int, *, killed_by_supervisor: bool = False) -> dict[str, Any]:
    """Decode a `waitpid` status into log fields.

    Args:
        status: the raw status returned by :func:`os.waitpid`.
        killed_by_supervisor: the supervisor itself sent SIGKILL, so no hint is added.

    Returns:
        ``{"exit_code": n}`` for a normal exit; ``{"signal": "SIGSEGV"}`` for a death by
        signal, plus ``core_dumped=True`` when a core was written and, for an unexplained
        SIGKILL, ``hint="killed: out of memory?"`` (the kernel's OOM killer sends SIGKILL);
        ``{"status": status}`` for anything else.
    """
    if os.WIFEXITED(status):
        return {"exit_code": os.WEXITSTATUS(status)}
    if not os.WIFSIGNALED(status):
        return {"status": status}
    signum = os.WTERMSIG(status)
    fields: dict[str, Any] = {"signal": _signal_name(signum)}
    if os.WCOREDUMP(status):
        fields["core_dumped"] = True
    if signum == signal.SIGKILL and not killed_by_supervisor:
        fields["hint"] = "killed: out of memory?"
    return fields


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


def returncode(status: int) -> int:
    """Return the `Popen.returncode` convention for a status: exit code, or -signal."""
    try:
        return os.waitstatus_to_exitcode(status)
    except ValueError:
        return status  # stopped or continued: not reported without WUNTRACED anyway
