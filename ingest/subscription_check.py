"""The catalogue check of a destination's subscriptions, for the admin and tenant API's
create and edit (ingest/admin_api.py): with event types in the catalogue, every subscription
must match one, so a misspelt type is refused (422) instead of silently never matching."""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from hookline.ingest.app_state import request_store
from hookline.shared.catalogue import check_subscriptions


async def subscription_warnings(request: web.Request, patterns: Sequence[str], *,
                                already: Sequence[str] = ()) -> list[str]:
    """Check a destination's subscriptions against the catalogue (read afresh, so a type
    added a moment ago counts); see :func:`hookline.shared.catalogue.check_subscriptions`.

    Args:
        request: the create or edit request (its app's store is read).
        patterns: the destination's new subscriptions.
        already: its subscriptions before an edit (archived types stay allowed for them).

    Returns:
        Warnings for the answer (a deprecated type subscribed).

    Raises:
        SubscriptionRefused: a pattern matches no type, or only archived ones (422).
    """
    catalogue = await request_store(request).list_event_types()
    return check_subscriptions(catalogue, patterns, already=already)
