"""Whether the hookline on disk is still the one this service started with.

`pip install --upgrade hookline` replaces the package's files under a running service. Its
processes keep the old code in memory, but a child the supervisor starts afterwards (a
respawn after a crash, a worker added with `hookline scale`) would load the new code, and its
store would migrate the database to the new schema under the old processes, which then fail
(ingest answering 500 to every publish). So before starting a child the supervisor compares
what is on disk now with what it started with: the version and, for each backend, the newest
migration. When they differ it starts nothing and stops the whole service instead, with exit
75, which systemd's `Restart=on-failure` answers by starting every process again on the new
code (OPERATIONS.md, "Upgrading").
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from hookline.shared.store.queries import newest_migration_on_disk
from hookline.shared.version import read_version

BACKENDS = ("sqlite", "postgres")
REREAD_AFTER_S = 0.5
"""How long the supervisor waits, seconds, before reading a changed code on disk again."""


@dataclass(frozen=True, slots=True)
class CodeOnDisk:
    """The installed hookline as a process started now would load it: its version and the
    newest migration of each backend (BACKENDS order)."""

    version: str
    schemas: tuple[int, ...]

    @classmethod
    def read(cls) -> CodeOnDisk:
        """What is on disk now. A package being replaced at this very moment may read as
        `0+unknown`, fail to list its migrations (schema -1) or hold a half-written version
        file (version `unreadable`): each reads as a change."""
        schemas = []
        for backend in BACKENDS:
            try:
                schemas.append(newest_migration_on_disk(backend))
            except (OSError, ValueError):
                schemas.append(-1)
        try:
            version = read_version()
        except (OSError, ValueError, RuntimeError, SyntaxError) as exc:  # TOMLDecodeError too
            version = f"unreadable ({type(exc).__name__})"
        return cls(version, tuple(schemas))

    def describe(self) -> str:
        """`0.1.0 (schema sqlite 29, postgres 29)`."""
        schemas = ", ".join(f"{backend} {n}" for backend, n in zip(BACKENDS, self.schemas,
                                                                    strict=True))
        return f"{self.version} (schema {schemas})"


class CodeWatch:
    """Remembers the code on disk when the service starts; :meth:`changed` says whether it
    has been replaced since."""

    def __init__(self) -> None:
        self.started = CodeOnDisk.read()

    def changed(self) -> str | None:
        """None while the code on disk is the one the service started with; else what
        changed, in words (for the log and the terminal). A difference is read twice,
        REREAD_AFTER_S apart, so a file caught half-written does not stop the service."""
        now = CodeOnDisk.read()
        if now == self.started:
            return None
        time.sleep(REREAD_AFTER_S)
        now = CodeOnDisk.read()
        if now == self.started:
            return None
        return (f"the hookline on disk is now {now.describe()}; this service started as "
                f"{self.started.describe()}")
