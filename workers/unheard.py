"""Claims a worker never heard of: a claim whose write failed for want of the database
(StoreUnavailable) may still have committed, its COMMIT sent before the connection was cut
and its answer lost. Its jobs are then leased to a process that does not know it holds them:
left alone they would wait out their lease (`lease_s`) and go through the quarantine one at a
time, and one on its final attempt would die "worker lost" without ever being sent.

So every lease token a worker process claims carries the process's own tag (8 random hex
digits after the claim's instant: ClaimRequest.token_tag), and after such a failure the
process hands back, uncharged, every job leased under its tag after the newest token it had
been given when the window's first failure came, that it neither holds nor let go itself
with no result (a crashed attempt: left to the quarantine)
(:meth:`hookline.shared.store.Store.hand_back_unheld`; a takeover among them keeps its
quarantine too). Another process's leases are never touched, even under the same worker
identity. A commit can land late (the server finishing it after the client gave up), so the
look (a write transaction) is repeated at the first write after each CHECK_EVERY_LEASES of
`lease_s` until `lease_s` after the last failure, and once more at a stop within that time.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Sequence

from hookline.shared.logs import get_logger
from hookline.shared.models import Claim
from hookline.shared.store import Store

log = get_logger()

CHECK_EVERY_LEASES = 1 / 6
"""How often, as a share of `lease_s`, the look is repeated while it is due (5 s of 30)."""


class UnheardClaims:
    """One worker process's tag and its record of claims that may have landed unheard.

    Args:
        store: an open store.
        worker_id: the process's lease identity.
        lease_s: the lease length, seconds: how long the look is repeated after a failure.

    Attributes:
        tag: the process's token tag (8 hex digits), for every ClaimRequest it makes.
    """

    def __init__(self, store: Store, worker_id: str, lease_s: float) -> None:
        self.store = store
        self.worker_id = worker_id
        self.lease_s = lease_s
        self.tag = secrets.token_hex(4)
        self._newest = ""  # the newest token claimed here
        self._after = ""  # the newest token when the first failure of the window came
        self._until = 0.0  # monotonic; the look is due until then
        self._next_look = 0.0  # monotonic; the next look, while due
        # Tokens newer than _after whose slot was let go with no result written (an attempt
        # that crashed): left to expire and be taken over in quarantine, never handed back.
        self._abandoned: set[str] = set()

    def given(self, claims: Iterable[Claim]) -> None:
        """Note claims this process was given (their tokens are known, held or not)."""
        for claim in claims:
            self._newest = max(self._newest, claim.lease_token)

    def abandoned(self, lease_token: str) -> None:
        """Note a claim let go with no result written (its lease is left to expire)."""
        # Outside a window, or not newer than _after, no look can match it: none to keep.
        if self.in_window() and lease_token > self._after:
            self._abandoned.add(lease_token)

    def claim_failed(self) -> None:
        """A write with a claim failed for want of the database: it may have landed."""
        now = time.monotonic()
        if now >= self._until:
            self._after = self._newest
            self._abandoned = set()  # each was given, so not newer than _after
        self._until = now + self.lease_s
        self._next_look = now

    def due(self) -> bool:
        """Whether to look before the next write."""
        now = time.monotonic()
        return now < self._until and now >= self._next_look

    def in_window(self) -> bool:
        """Whether a claim may still land unheard (`lease_s` after the last failure): a
        stopping worker looks once more then, whenever it last looked."""
        return time.monotonic() < self._until

    async def hand_back(self, held: Sequence[str]) -> None:
        """Hand back the jobs leased under this process's tag after the window's first failure
        that it does not hold (`held`: its lease tokens); each is logged `job_handed_back`.

        Raises:
            StoreUnavailable, StoreBusy: nothing handed back; due again before the next write.
        """
        handed = await self.store.hand_back_unheld(self.worker_id, self.tag, self._after,
                                                   [*held, *self._abandoned])
        self._next_look = time.monotonic() + self.lease_s * CHECK_EVERY_LEASES
        for lease in handed:
            log.warning("job_handed_back", job_id=lease.job_id, event_id=lease.event_id,
                        destination=lease.destination, tenant=lease.tenant,
                        lease_token=lease.lease_token, worker=self.worker_id,
                        reason="claim answer lost")
