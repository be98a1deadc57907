"""The tenants' part of the store contract (:class:`hookline.shared.store.Store` includes it).

Tenants, their token state and what the tenant API reads and does: every method takes the
tenant explicitly and reaches only that tenant's rows (the isolation the tenant API relies
on is enforced in the store's queries, not by filtering afterwards). Instants are unix
seconds on the store's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from hookline.shared.record_models import Job
from hookline.shared.store.tenant_reads_tx import DestinationStats, TenantTokenState, TestDelivery
from hookline.shared.store.tenants_tx import TenantRemoval
from hookline.shared.tenant_models import Tenant, TenantFields


class TenantStore(Protocol):
    """Tenants and the tenant API's reads and actions."""

    # -- tenants ---------------------------------------------------------------------------

    async def put_tenant(self, tenant: str, fields: TenantFields) -> tuple[Tenant, bool]:
        """Create the tenant, or change the fields given (None: unchanged).

        Returns:
            The tenant as stored, and whether it was created.

        Raises:
            InvalidInput: a bad or reserved id (field "id").
        """

    async def get_tenant(self, tenant: str) -> Tenant:
        """One tenant by id. Raises NotFound; for a deleted tenant whose events are still
        stored (its history, kept until retention) the message says so, that nothing can
        be changed for it, and that the listings filtered by its id still show them
        (:meth:`tenant_was_deleted`)."""

    async def tenant_was_deleted(self, tenant: str) -> bool:
        """Whether a listing (dead letters, jobs, events) may be filtered by `tenant`, and
        what it then shows: False for a tenant that exists, True for a deleted one whose
        events are still stored (its events, jobs and attempts are kept until retention:
        listed read-only, as its history). An id with neither, never used or whose
        history retention purged, raises NotFound (`no tenant 'ID'`, as :meth:`get_tenant`
        says it). Writes ask :meth:`get_tenant` instead, which refuses a deleted tenant."""

    async def deleted_tenants(self, tenants: Sequence[str]) -> set[str]:
        """Which of `tenants` no tenant has as its id now: for ids known to have been used,
        as the owners :meth:`destination_tenants` lists are (a deleted tenant's removed
        destinations still name it), the deleted ones, which a message listing those
        owners marks so (an id never used would be in the set too). One indexed read per
        id, for a message's few ids."""

    async def list_tenants(self, *, after: str | None = None, prefix: str | None = None,
                           limit: int = 100) -> list[Tenant]:
        """Tenants in id order after `after` (keyset paging), those whose id starts with
        `prefix` only when given; at most `limit` (1 to 1000, else InvalidInput)."""

    async def delete_tenant(self, tenant: str, *, dry_run: bool = False) -> TenantRemoval:
        """Delete a tenant: its live destinations are removed (their unfinished jobs end dead,
        their history stays until retention) and the tenant is forgotten. `dry_run` only
        counts. Raises NotFound, or Conflict for the default tenant."""

    async def tenant_destination_counts(self, tenants: Sequence[str]) -> dict[str, int]:
        """Live destinations of each of `tenants` (0 for one without any or unknown): one
        indexed read over their id range (a page of :meth:`list_tenants`)."""

    async def destination_tenants(self, name: str, *, first: str | None = None,
                                  limit: int = 100) -> tuple[list[str], int]:
        """Which tenants have a destination named `name` (names are unique only within a
        tenant): what an operator who gave the wrong tenant, or none, is told to pass.

        A removed destination counts under the name it keeps, `NAME~removed-ID`: a plain
        name finds live destinations only. One read of every tenant's destinations (no index
        leads with the name): for an operator's lookup, not a hot path.

        Args:
            name: the destination name, exactly.
            first: this tenant's id comes first when it has one (None: plain id order).
            limit: at most this many ids are returned (at least 1).

        Returns:
            Up to `limit` tenant ids (`first` first when it is one, then in id order), and
            how many tenants have a destination of that name in all.

        Raises:
            InvalidInput: `limit` below 1.
        """

    async def removed_destination_names(self, name: str, *, tenant: str,
                                        limit: int = 3) -> tuple[list[str], int]:
        """The names `tenant`'s removed destinations once named `name` keep
        (`NAME~removed-ID`), newest first, at most `limit`, and how many there are in all:
        where an operator who names a removed destination finds its jobs. Raises
        InvalidInput: `limit` below 1."""

    async def revoke_tenant_tokens(self, tenant: str) -> Tenant:
        """Raise the tenant's token epoch: every token minted before stops working.
        Raises NotFound."""

    # -- the tenant API (shared/store/tenant_reads_tx.py) -------------------------------------

    async def token_signing_key(self, purpose: str) -> bytes:
        """The database's signing key for `purpose` (`tenant_tokens`), made on first use:
        every process and host of the database gets the same key (a race to make it is won
        by one insert, which every racer then reads). 32 random bytes.

        Raises:
            StoreError: the database cannot be reached.
        """

    async def tenant_token_state(self, tenant: str) -> TenantTokenState:
        """The store's time now and whether `tenant` exists, is disabled, and its token
        epoch: what a tenant token is checked against, in one read."""

    async def list_tenant_jobs(self, tenant: str, *, destination: str | None = None,
                               status: str | None = None, before_id: int | None = None,
                               limit: int = 100) -> list[Job]:
        """Jobs of `tenant`'s destinations (removed ones included), newest first; optionally
        of one destination (by name) and/or status, and with ids below `before_id` (keyset
        paging)."""

    async def has_destination(self, name: str, *, tenant: str) -> bool:
        """Whether `tenant` has a destination named `name`: a live one, or a removed one by
        the name it keeps (`NAME~removed-ID`), as a destination filter of the job and event
        lists takes it. One indexed read of that tenant's rows only (unlike
        :meth:`destination_tenants`), so the tenant API may ask it."""

    async def destination_stats(self, name: str, *, tenant: str,
                                window_s: float) -> DestinationStats:
        """One destination of `tenant`: its jobs now and its attempts over the last
        `window_s` seconds (success rate, p50/p99 duration, last failure). Raises NotFound."""

    async def send_test_event(self, name: str, *, tenant: str,
                              event_type: str | None = None) -> TestDelivery:
        """Store a test event for `tenant` (source `_test`; its payload chosen by
        :func:`hookline.shared.store.tenant_reads_tx.choose_test_payload_tx`: a `hookline.ping`,
        or `event_type`) and one job for its destination `name` only (no fan-out, no payload
        filter), in one transaction, and wake workers. Raises NotFound; InvalidInput("type")
        when the destination does not subscribe to `event_type`."""

    async def tenant_event_types(self, tenant: str) -> list[str]:
        """The event types of `tenant`'s newest events and its destinations' subscription
        patterns, sorted, each once (what the portal's picker offers)."""
