"""The JSON shape of each resource, one function per resource: the admin API answers with it
and the CLI's `--json` prints it, so both say the same thing the same way."""

from __future__ import annotations

from typing import Any

from shared.models import Destination


def destination_secret_view(dest: Destination) -> dict[str, Any]:
    """A destination's signing secret, shown whole to an admin who asked for it (a reveal or
    a rotation): `secret` is the current one; `previous_secret` (redacted like in the
    destination, or None) still signs until `previous_secret_until` (unix seconds, or None)."""
    return {"name": dest.name, "secret": dest.secret,
            "previous_secret": dest.redacted()["previous_secret"],
            "previous_secret_until": dest.previous_secret_until}


def previous_secret_expired_view(dest: Destination, expired: bool) -> dict[str, Any]:
    """The answer to expiring a destination's previous secret early: `expired` is False when
    no previous secret was still signing (nothing changed)."""
    return {"name": dest.name, "expired": expired}
