"""The per-connection half of the outbound address guard (shared/policy/netguard.py): an
aiohttp resolver that vets every answer before aiohttp connects to it. Apart from netguard so
that the config (and every `hookline` command) does not import aiohttp."""

from __future__ import annotations

import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from hookline.shared.errors import DestinationBlocked
from hookline.shared.policy.netguard import AddressPolicy, vet_addresses


class BlockedAddress(OSError):
    """Raised inside aiohttp's connector (which only handles OSError) for a refused address;
    the sender reports it as `DestinationBlocked: <reason>`."""


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that vets every answer before aiohttp connects to it.

    aiohttp connects to exactly the addresses a resolver returns, so vetting here means the
    address checked is the address used: no second lookup for a rebinding DNS server to
    answer differently. `inner` defaults to aiohttp's ThreadedResolver (the system's
    getaddrinfo), named rather than aiohttp's DefaultResolver, which silently becomes the
    aiodns resolver (other answers, no /etc/hosts) when that package is installed.
    """

    def __init__(self, policy: AddressPolicy, inner: AbstractResolver | None = None) -> None:
        self.policy = policy
        self._inner = inner or ThreadedResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        """Resolve with the inner resolver, then refuse if any answer is not allowed.

        Raises:
            BlockedAddress: an answer is outside the policy.
        """
        answers = await self._inner.resolve(host, port, family)
        try:
            vet_addresses(host, [a["host"] for a in answers], self.policy)
        except DestinationBlocked as exc:
            raise BlockedAddress(str(exc)) from None
        return answers

    async def close(self) -> None:
        """Close the inner resolver."""
        await self._inner.close()
