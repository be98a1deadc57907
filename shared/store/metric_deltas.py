"""The figures /metrics reads, kept up to date by the transactions that change the rows.

Table `metric_counts` (schema 11) holds, per destination id, `jobs` by status, `attempts` by
outcome class (`in_flight` among them), `latency` (accept -> delivered seconds of each job
delivery: `n` and the sum `total_s` per histogram bucket, not cumulative) and `oldest`
(the `run_at` of its oldest pending job, in `total_s`; NULL when none) and `filtered` (events
its payload filter turned away, label ""; schema 16); destination id 0 holds the totals of
the first three and `filtered` over every destination, `events` (events stored) and
`notifications` (operational events made, by kind: a counter; schema 17).
A scrape reads these rows, never the jobs (shared/store/operator_tx.py, `shown_figures_tx`).

Each write transaction adds up what it changed in a :class:`MetricDeltas` in Python (it
knows every row it changes: the statements return them) and applies them with ONE statement
at its end (`add_metric_deltas`), in the same transaction, so the figures never drift from
the rows. Both backends append them to `metric_count_deltas`: the counter rows of thousands
of destinations lie on pages of their own, and adding into them per transaction would
write one such page per destination reached (SQLite: to the WAL, fsynced with every
commit), or make PostgreSQL's hosts wait on shared counter rows. A fold adds them in and
reads `oldest` anew, with one index probe, for each destination whose pending jobs changed
(an `oldest` row, or a `jobs` `pending` row): `fold_metric_deltas` (before every read of
the figures, and ingest's maintenance round) and, on SQLite, the log's own trigger each time
it reaches 1,024 rows (sqlite_migrations/021_metric_log.sql, 023_oldest_from_pending.sql).
`recount_metric_counts` rebuilds every gauge from the rows (the repair path).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from hookline.shared.record_models import HANDED_BACK
from hookline.shared.store.ops import Query, Rows, Tx

LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
                     3600.0, 21600.0, 86400.0)
"""Upper bounds of the accept -> delivered latency histogram, seconds (+Inf implied): the
one definition (the migration that filled metric_counts from the rows spells them too)."""
INF_LABEL = "+Inf"
IN_FLIGHT = "in_flight"
"""The outcome class of an attempt not finished yet."""
TOTALS = 0
"""The destination id of the totals rows (no destination has id 0)."""
Key = tuple[str, int, str]


def bucket_label(latency_s: float) -> str:
    """The label of the smallest bucket bound at or above `latency_s` seconds."""
    for bound in LATENCY_BUCKETS_S:
        if latency_s <= bound:
            return bound_label(bound)
    return INF_LABEL


def bound_label(bound: float) -> str:
    """A bucket bound as metric_counts labels it (as Prometheus writes it: 0.05, 1, 86400)."""
    return INF_LABEL if math.isinf(bound) else f"{bound:g}"


def outcome_class(error: str | None, status_code: int | None) -> str:
    """An attempt's outcome class from its error and HTTP status (the migration's CASE)."""
    if error is not None and error.startswith(("lease expired", "worker lost")):
        return "worker_lost"
    if status_code is not None and 200 <= status_code <= 299:
        return "delivered"
    if status_code is not None:
        return f"http_{status_code // 100}xx"
    if error is not None and error.startswith(HANDED_BACK):
        return "handed_back"
    if error is not None:
        return "transport_error"
    return IN_FLIGHT


class MetricDeltas:
    """What one transaction changed in the maintained figures, added up per
    (family, destination id, label); :meth:`apply` writes it in one statement."""

    __slots__ = ("_counts", "_oldest")

    def __init__(self) -> None:
        self._counts: dict[Key, list[float]] = {}
        self._oldest: set[int] = set()

    def _add(self, family: str, destination_id: int, label: str, n: int,
             total_s: float = 0.0) -> None:
        # The destination's key only: rows() adds up the totals rows (TOTALS) once per
        # transaction, rather than every change updating two keys.
        key = (family, destination_id, label)
        found = self._counts.get(key)
        if found is None:
            self._counts[key] = [n, total_s]
        else:
            found[0] += n
            found[1] += total_s

    def jobs(self, destination_id: int, before: str | None, after: str | None,
             n: int = 1) -> None:
        """`n` jobs of a destination went from status `before` to `after` (None: the job
        was inserted, or deleted)."""
        if before == after or n == 0:
            return
        if before is not None:
            self._add("jobs", destination_id, before, -n)
        if after is not None:
            self._add("jobs", destination_id, after, n)
        if before == "pending" or after == "pending":
            self._oldest.add(destination_id)

    def pending_moved(self, destination_id: int) -> None:
        """A pending job's run_at changed (retry now): its oldest pending job may differ."""
        self._oldest.add(destination_id)

    def attempts(self, destination_id: int, before: str | None, after: str | None,
                 n: int = 1) -> None:
        """`n` attempts went from outcome class `before` to `after` (None: inserted, or a
        row deleted; a finished attempt deleted by retention stays counted: pass nothing)."""
        if before == after or n == 0:
            return
        if before is not None:
            self._add("attempts", destination_id, before, -n)
        if after is not None:
            self._add("attempts", destination_id, after, n)

    def delivered(self, destination_id: int, latency_s: float) -> None:
        """A job became done `latency_s` seconds after its event was accepted."""
        self._add("latency", destination_id, bucket_label(latency_s), 1, latency_s)

    def filtered(self, destination_id: int, n: int) -> None:
        """`n` events a destination subscribes to were turned away by its payload filter
        (a counter: family `filtered`, label "")."""
        if n:
            self._add("filtered", destination_id, "", n)

    def events(self, n: int) -> None:
        """`n` events were stored (negative: deleted)."""
        if n:
            key = ("events", TOTALS, "")
            found = self._counts.setdefault(key, [0, 0.0])
            found[0] += n

    def notification(self, kind: str) -> None:
        """One operational event of `kind` (its type without `hookline.`) was made: a
        counter of the totals only (retention and the repair path leave it alone)."""
        found = self._counts.setdefault(("notifications", TOTALS, kind), [0, 0.0])
        found[0] += 1

    def rows(self) -> list[tuple[str, int, str, int, float | None]]:
        """(family, destination id, label, n, total_s) of every non-zero change, sorted (so
        concurrent writers touch counter rows in one order); an `oldest` row asks for that
        destination's oldest pending job to be read again (a `jobs` `pending` row asks it
        too, so it is left out beside one)."""
        out: list[tuple[str, int, str, int, float | None]] = []
        # Every change added up into its totals row (TOTALS); events and notifications have
        # totals keys only, so they reach the rows through this alone.
        totals: dict[Key, list[float]] = {}
        for (family, destination_id, label), (n, total) in self._counts.items():
            if destination_id != TOTALS and (n or total):
                out.append((family, destination_id, label, int(n), float(total)))
            found = totals.setdefault((family, TOTALS, label), [0, 0.0])
            found[0] += n
            found[1] += total
        out += [(family, destination_id, label, int(n), float(total))
                for (family, destination_id, label), (n, total) in totals.items() if n or total]
        # A fold reads the oldest pending job anew for each destination whose pending count
        # changed too, so the `oldest` row is needed only where the count did not: half the
        # rows of an ingest transaction with thousands of destinations (schema 23).
        pending = {destination_id for family, destination_id, label, n, _ in out
                   if family == "jobs" and label == "pending" and n}
        out += [("oldest", destination_id, "", 0, None) for destination_id in self._oldest
                if destination_id not in pending]
        return sorted(out, key=lambda r: (r[0], r[1], r[2]))

    def apply(self) -> Tx[None]:
        """Write the changes (one statement; nothing when there are none)."""
        found = self.rows()
        if found:
            yield Query("add_metric_deltas", {"deltas": Rows(
                ("families", "destination_ids", "labels", "ns", "totals_s"), found)},
                per_row=True)


def add_all(deltas: MetricDeltas, items: Iterable[tuple[int, str | None, str | None]]) -> None:
    """Record job status changes given as (destination id, before, after)."""
    for destination_id, before, after in items:
        deltas.jobs(destination_id, before, after)
