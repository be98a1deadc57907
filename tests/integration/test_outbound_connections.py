"""Outbound connections: a destination whose host name moves to another address is followed
within the documented bound, through the real worker loop, sender and connection pool, to
two real receivers on 127.0.0.2 and 127.0.0.3 (both answering). The name is resolved by a
resolver the test controls, injected where the system resolver normally sits (under the SSRF
guard and aiohttp's DNS cache)."""

from __future__ import annotations

import asyncio
import socket
import time

import aiohttp
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from hookline.rehearsal.receiver import Endpoint, Receiver
from hookline.shared.config import Config
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.workers.connections import AgedConnector, follow_bound_s
from hookline.workers.loop import Worker
from hookline.workers.sender import Sender
from tests.conftest import new_event

HOST = "moved.hookline.test"
CONFIG = Config(allow_networks="127.0.0.0/8", retry_base_s=0.05, retry_cap_s=0.1,
                max_attempts=3, lease_s=5.0, attempt_timeout_s=2.0, poll_interval_s=0.2,
                graceful_timeout_s=0.5, worker_concurrency=4, max_connection_age_s=1.0)


class MovableResolver(AbstractResolver):
    """Answers `HOST` with whatever address the test last set (a hosts map it controls)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.lookups = 0

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        if host != HOST:
            raise OSError(f"unknown host {host}")
        self.lookups += 1
        return [ResolveResult(hostname=host, host=self.address, port=port,
                              family=socket.AF_INET, proto=0, flags=socket.AI_NUMERICHOST)]

    async def close(self) -> None:
        pass


async def _deliver_while_moving(store: Store, config: Config, *, move_after_s: float,
                                watch_s: float) -> tuple[list[float], list[float], int]:
    """Send a steady trickle of events to HOST (10/s) while it moves from 127.0.0.2 to
    127.0.0.3; returns the arrival times (seconds after the move) seen at the old and at the
    new address, and how many connections the pool retired for their age."""
    secret = generate_secret()
    old, new = Receiver([Endpoint("ep", secret)]), Receiver([Endpoint("ep", secret)])
    port = await old.start("127.0.0.2")
    await new.start("127.0.0.3", port)
    try:
        await store.add_destination(name="ep", url=f"http://{HOST}:{port}/ep", secret=secret,
                                    event_types=["*"], max_in_flight=4)
        resolver = MovableResolver("127.0.0.2")
        stop = asyncio.Event()
        async with Sender(timeout_s=config.attempt_timeout_s, policy=config.address_policy,
                          resolver=resolver,
                          max_connection_age_s=config.max_connection_age_s) as sender:
            task = asyncio.create_task(Worker(store, config, "w1", sender).run(stop))
            arrivals: dict[str, list[float]] = {"old": [], "new": []}
            seen = {"old": 0, "new": 0}
            moved_at: float | None = None
            t0 = time.monotonic()
            i = 0
            try:
                while time.monotonic() - t0 < move_after_s + watch_s:
                    if moved_at is None and time.monotonic() - t0 >= move_after_s:
                        resolver.address = "127.0.0.3"
                        moved_at = time.monotonic()
                    await store.add_events([new_event(f"e{i}")])
                    i += 1
                    await asyncio.sleep(0.1)
                    for name, receiver in (("old", old), ("new", new)):
                        count = len(receiver.requests)
                        if count > seen[name]:
                            when = time.monotonic() - (moved_at or time.monotonic())
                            arrivals[name] += [when] * (count - seen[name])
                            seen[name] = count
            finally:
                stop.set()
                await task
            connector = sender._session.connector if sender._session else None
            retired = connector.retired if isinstance(connector, AgedConnector) else 0
        return arrivals["old"], arrivals["new"], retired
    finally:
        await old.stop()
        await new.stop()


@pytest.mark.sqlite_only
async def test_moved_destination_is_followed_within_the_bound(real_store):
    """After the name moves to 127.0.0.3 (127.0.0.2 still answering), requests stop reaching
    the old address within max_connection_age_s + the DNS cache, and reach the new one.
    Before connections had a maximum age, every request kept going to the old address."""
    bound_s = follow_bound_s(CONFIG.max_connection_age_s)  # 2 s with a 1 s age
    old, new, retired = await _deliver_while_moving(real_store, CONFIG, move_after_s=1.0,
                                                    watch_s=bound_s + 4.0)
    last_old = max((t for t in old if t > 0), default=0.0)
    first_new = min(new) if new else None
    print(f"moved destination: last request at the old address {last_old:.2f} s after the "
          f"move, first at the new one {first_new} s; bound {bound_s} s; "
          f"{retired} connections retired for age")
    assert old and new, (old, new)
    # Sampled every 0.1 s; one poll's slack besides the bound.
    assert last_old <= bound_s + 1.0, old
    assert sum(1 for t in new if t > bound_s + 1.0) >= 10  # the trickle now goes there
    assert retired >= 1


async def test_aged_connector_is_built_on_public_connect():
    """AgedConnector relies on BaseConnector.connect handing out every connection, new or
    pooled, as a Connection with `.protocol` and `.close()`; fails if aiohttp changes that."""
    assert "connect" in vars(aiohttp.BaseConnector)
    assert {"protocol", "close"} <= set(dir(aiohttp.connector.Connection))
    with pytest.raises(ValueError, match="max_age_s"):
        AgedConnector(max_age_s=0)


async def test_guard_resolves_with_the_threaded_resolver():
    """The guard's default resolver is aiohttp's ThreadedResolver (the system's getaddrinfo),
    not DefaultResolver, which silently becomes aiodns once that package is installed."""
    from aiohttp.resolver import ThreadedResolver

    from hookline.shared.policy import guarded_resolver, netguard

    guard = guarded_resolver.GuardedResolver(CONFIG.address_policy)
    assert type(guard._inner) is ThreadedResolver
    assert not hasattr(guarded_resolver, "DefaultResolver")
    assert not hasattr(netguard, "DefaultResolver")
