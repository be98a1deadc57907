"""Process lifecycle helpers shared by every child of the supervisor (ingest and workers).

The supervisor and its children agree on two things only: the reserved exit code
:data:`BOOT_ERROR_EXIT`, and that a child exits when its parent is gone. Nothing here imports
the supervisor, so a child can be run on its own (for tests, or under another supervisor).
"""

from __future__ import annotations

import asyncio
import os
import signal

from shared.logs import get_logger

BOOT_ERROR_EXIT = 3
"""Exit code of a child that cannot boot (bad config, unopenable database, port in use).

The supervisor stops the whole service instead of respawning such a child forever
(compare gunicorn's `WORKER_BOOT_ERROR`).
"""


async def watch_parent(stop: asyncio.Event, interval_s: float = 1.0) -> None:
    """Set `stop` when this process's parent changes, i.e. the supervisor died.

    An orphan is re-parented (to init or a subreaper), so a change of `os.getppid()` is the
    portable sign that nobody will stop or reap us any more. Returns as soon as `stop` is set,
    by us or by anyone else.

    Args:
        stop: event the child's main loop waits on; set when the parent is gone.
        interval_s: how often to check the parent, in seconds.
    """
    parent_pid = os.getppid()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
        except TimeoutError:
            pass
        if os.getppid() != parent_pid:
            get_logger().warning("parent_gone", parent_pid=parent_pid, new_parent_pid=os.getppid())
            stop.set()


def install_stop_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Make SIGTERM and SIGINT set `stop`, and do nothing else.

    SIGINT is included because Ctrl-C in a terminal reaches the whole process group, children
    too; each child then stops gracefully on its own rather than dying with a traceback.

    Args:
        loop: the running event loop (handlers run in its thread, between callbacks).
        stop: event the child's main loop waits on.
    """
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
