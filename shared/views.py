"""The JSON shape of each resource, written once: the admin API answers it and the CLI's
`--json` prints it, so both say the same thing about the same record."""

from __future__ import annotations

from typing import Any

from shared.models import DeadLetter


def dead_letter_view(dead: DeadLetter) -> dict[str, Any]:
    """One dead job as `GET /v1/admin/dead` and `hookline dead --json` show it: the job's
    fields, then `replayable` and `not_replayable_reason` (`body purged`, `destination
    removed`, or null when it can be replayed)."""
    job = dead.job
    return {**{name: getattr(job, name) for name in job.__slots__},
            "replayable": dead.replayable,
            "not_replayable_reason": dead.not_replayable_reason}
