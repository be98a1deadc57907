"""`hookline serve`: build the child process specs (ingest + N workers) and run the arbiter."""

from __future__ import annotations

import asyncio
import sys

from shared.config import Config
from shared.errors import HooklineError
from shared.logs import configure_logging
from shared.store import open_store
from supervisor.arbiter import Arbiter, ChildSpec


def ingest_spec(config: Config) -> ChildSpec:
    """The ingest child: `python -m ingest --config-json ... --slot ingest`."""
    return ChildSpec(slot="ingest", argv=(sys.executable, "-m", "ingest", "--config-json",
                                          config.to_json(), "--slot", "ingest"))


def worker_spec(config: Config, number: int) -> ChildSpec:
    """Worker child number `number` (1-based): slot `worker-N`."""
    slot = f"worker-{number}"
    return ChildSpec(slot=slot, argv=(sys.executable, "-m", "workers", "--config-json",
                                      config.to_json(), "--slot", slot))


async def check(config: Config) -> None:
    """Open the database (applying migrations) and close it: the `--check` probe.

    Raises:
        HooklineError: the database cannot be opened or migrated.
    """
    store = open_store(config.db, synchronous=config.synchronous,
                       busy_timeout_s=config.busy_timeout_s)
    await store.open()
    await store.close()


def run(config: Config) -> int:
    """Run ingest and `config.workers` workers under the arbiter until stopped.

    The database is opened (and migrated) once here first, so that children never race to
    migrate and a bad path stops the service before anything is spawned.

    Returns:
        The process exit code: 0 after a clean stop, 3 when a child could not boot.
    """
    configure_logging("supervisor", config.log_level)
    try:
        asyncio.run(check(config))
    except HooklineError as exc:
        print(f"hookline: cannot start: {exc}", file=sys.stderr)
        return 3
    specs = [ingest_spec(config)] + [worker_spec(config, n) for n in range(1, config.workers + 1)]
    arbiter = Arbiter(specs, graceful_timeout_s=config.graceful_timeout_s + 2.0,
                      make_worker_spec=lambda n: worker_spec(config, n))
    return arbiter.run()
