"""`python -P -m hookline.rehearsal.hooked_worker --slot worker-N`: the production worker
(:func:`hookline.workers.main.run`) with the rehearsal's crash hook wrapped around its Sender.

The rehearsal's poison job needs a worker that dies in the middle of a delivery: this module
is what rehearsal/hooked_serve.py starts instead of `hookline.workers`, and it SIGKILLs
itself just before sending an event of the type named in :data:`CRASH_EVENT_TYPE_ENV`. The
production worker has no such code path; everything else (claims, leases, finishes) is the
production worker's own.
"""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Sequence

from hookline.shared.logs import configure_logging, get_logger
from hookline.shared.models import AttemptResult, Claim
from hookline.shared.process.child import exit_process
from hookline.shared.process.lifecycle import BOOT_ERROR_EXIT, child_config_or_exit
from hookline.workers.main import run
from hookline.workers.sender import SendsAttempts

CRASH_EVENT_TYPE_ENV = "REHEARSAL_CRASH_EVENT_TYPE"
"""The event type whose send kills the worker; set by rehearsal/hooked_serve.py for its
children (not a `HOOKLINE_*` setting: the service never reads it)."""


class CrashingSender:
    """Sends like the Sender it wraps, except that an event of `event_type` SIGKILLs this
    process just before its request goes out (a poison job: the attempt is claimed, never
    finished).

    Args:
        sender: the worker's entered Sender.
        event_type: the poison event type, e.g. `drill.poison`.
    """

    def __init__(self, sender: SendsAttempts, event_type: str) -> None:
        self.sender = sender
        self.event_type = event_type

    async def send(self, claim: Claim, timeout_s: float | None = None) -> AttemptResult:
        """Die on the poison type; else the wrapped sender's attempt, unchanged."""
        if claim.event_type == self.event_type:
            get_logger().warning("drill_crash", job_id=claim.job_id,
                                 event_type=claim.event_type)
            os.kill(os.getpid(), signal.SIGKILL)
        return await self.sender.send(claim, timeout_s)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one hooked worker process; returns its exit code (as `python -m hookline.workers`;
    3 when :data:`CRASH_EVENT_TYPE_ENV` is unset, which no respawn fixes)."""
    parser = argparse.ArgumentParser(prog="python -m hookline.rehearsal.hooked_worker")
    parser.add_argument("--config-json", help="default: the HOOKLINE_CONFIG_JSON variable")
    parser.add_argument("--slot", default="worker-1")
    args = parser.parse_args(argv)
    config = child_config_or_exit(args.config_json, args.slot)
    event_type = os.environ.get(CRASH_EVENT_TYPE_ENV, "")
    if not event_type:
        configure_logging(args.slot)
        get_logger().error("boot_failed", reason=f"{CRASH_EVENT_TYPE_ENV} is not set")
        return BOOT_ERROR_EXIT
    return run(config, args.slot,
               wrap_sender=lambda sender: CrashingSender(sender, event_type))


if __name__ == "__main__":
    exit_process(main())
