"""When the service is ready: every initial slot's first child says so.

A child reports ready by writing its pid into its readiness marker (a file in the runtime
folder, :func:`hookline.shared.process.lifecycle.ready_path`): ingest once it listens, a worker once
it has opened the store (shared/process/child.py). The arbiter removes a slot's marker before it
spawns a child there, and asks :meth:`Readiness.check` on every tick until every slot it started
with has a marker naming one of its live children; only then does systemd get `READY=1`,
so units ordered after hookline never meet a refused connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping
from pathlib import Path


class Readiness:
    """Tracks which initial slots have reported ready.

    Args:
        ready_files: slot -> path of its readiness marker, for the slots that report
            readiness (a slot without a marker counts as ready once started).
    """

    def __init__(self, ready_files: Mapping[str, str], *, done: bool = False) -> None:
        self._files = {slot: Path(path) for slot, path in ready_files.items()}
        self._pending = set(self._files)
        self.done = done  # True once check() has reported ready (or before any start)

    @property
    def pending(self) -> list[str]:
        """The slots not ready yet, sorted."""
        return sorted(self._pending)

    @staticmethod
    def clear(path: str) -> None:
        """Remove a slot's marker before a child is spawned there (a stale marker of an
        earlier child, or an earlier run, must not count)."""
        with contextlib.suppress(OSError):
            Path(path).unlink(missing_ok=True)

    def check(self, live: Mapping[str, Collection[int]], wanted: Collection[str]) -> bool:
        """Look at the markers of the slots still pending.

        Args:
            live: slot -> pids of its live children.
            wanted: slots still wanted (a slot retired meanwhile no longer counts).

        Returns:
            True exactly once: on the call that finds the last pending slot ready.
        """
        if self.done:
            return False
        for slot in list(self._pending):
            if slot not in wanted or _marker_pid(self._files[slot]) in live.get(slot, ()):
                self._pending.discard(slot)
        if self._pending:
            return False
        self.done = True
        return True


def _marker_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
