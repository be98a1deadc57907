"""The claim: which due jobs a worker takes, leased, in one write transaction.

:class:`ClaimOperations` is mixed into :class:`hookline.shared.store.logic.StoreLogic`; its
transactions are generators of named-query operations (see :mod:`hookline.shared.store.ops`),
driven by the backend. The finish side is in :mod:`hookline.shared.store.finish_tx`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from hookline.shared.endpoint_models import parse_headers
from hookline.shared.logs import get_logger
from hookline.shared.models import Claim, ClaimRequest
from hookline.shared.policy import forwarding
from hookline.shared.policy.delivery import (
    UNREADABLE_PREFIX,
    choose_with_takeovers,
    fair_room,
    next_send_after,
    share_left,
    unsettled_by_more,
)
from hookline.shared.policy.notify import NotifyPolicy, chat_body, is_operational
from hookline.shared.store import notify_tx
from hookline.shared.store.finish_tx import fail_unsendable_tx
from hookline.shared.store.metric_deltas import IN_FLIGHT, MetricDeltas, outcome_class
from hookline.shared.store.ops import (
    BEGIN_WRITE,
    DURABLE,
    NOTIFY,
    NOW,
    AfterCommit,
    Query,
    Rows,
    Tx,
    count,
    one,
    rows,
)

log = get_logger()
LOST_AT_CAP = "worker lost (lease expired on the final attempt)"
"""The error kill_lost_at_cap gives a job and its attempt (the queries spell it too)."""

_NO_ID_BOUND = 2**63 - 1  # claim_window's `upto` when the walk goes to the ring's end


class ClaimOperations:
    """The claim's transactions (see :meth:`hookline.shared.store.Store.claim`).

    `LOCKS_DESTINATIONS`: the claim locks the destinations it serves before counting their
    free slots (PostgreSQL, whose claimers run concurrently); SQLite's single writer needs no
    lock and reads the slots in one query. `DUE_TIES_IN_ID_ORDER`: due_jobs reads a
    destination's jobs of equal run_at in id order (SQLite's index ends with the rowid;
    PostgreSQL's does not), so a bounded read knows that every job it left unread sorts
    after its last (see _read_due).
    """

    LOCKS_DESTINATIONS = False
    DUE_TIES_IN_ID_ORDER = True  # due_jobs reads equal run_at in id order (SQLite's jobs_due)
    CLAIM_WINDOW = 64  # most destinations one claim considers (see _claim_window)
    notify: NotifyPolicy  # StoreLogic's: when operational events are made
    _claim_cursor = 0  # the destination id this process's next claim walks from (exclusive)

    def _claim_tx(self, request: ClaimRequest) -> Tx[tuple[list[Claim], bool]]:
        # Most wake-ups under load find the work already taken by the other workers:
        # a read costs no write lock, so only a claim that can take something writes.
        if not (yield one("claim_probe", max_attempts=request.max_attempts))["claimable"]:
            return [], False
        yield BEGIN_WRITE
        deltas = MetricDeltas()
        claimed = yield from self._claim_in(request, deltas)
        yield from deltas.apply()
        return claimed

    def _claim_in(self, request: ClaimRequest,
                  deltas: MetricDeltas) -> Tx[tuple[list[Claim], bool]]:
        """The claim itself (see Store.claim) inside a write transaction: choose the jobs,
        then lease them, record their attempts and read what sending needs, each in one
        statement for the whole batch (a claim of 64 jobs is 5 statements, not 320).
        Returns the claims and whether a takeover was left waiting (see Store.claim)."""
        now = yield NOW
        dead = [dict(r) for r in (yield rows("kill_lost_at_cap",
                                              max_attempts=request.max_attempts))]
        killed = {r["id"]: r["destination_id"] for r in dead}
        if killed:  # their in-flight attempts end with them, in this transaction
            for destination_id in killed.values():
                deltas.jobs(destination_id, "running", "dead")
            for r in (yield rows("close_attempts_lost_at_cap", job_ids=list(killed))):
                deltas.attempts(killed[r["job_id"]], IN_FLIGHT, "worker_lost")
            # The worker that held them cannot tell: their story's end (hookline logs --job).
            yield AfterCommit(lambda: _log_lost_at_cap(dead, request.worker))
        ids = yield from self._claim_window(request)
        if self.LOCKS_DESTINATIONS and ids:  # lock first (id order), then count the free slots
            ids = [r["id"] for r in (yield rows("lock_claimable_destinations",
                                                destination_ids=ids))]
        if not ids:
            return [], False
        slots = list((yield rows("destination_slots", destination_ids=ids)))
        # The per-tenant share applies only while destinations of several tenants exist.
        per_tenant = request.per_tenant if slots and slots[0]["several_tenants"] else None
        rates: dict[int, tuple[float, float]] = {}  # id -> (per second, next_send_at)
        offers: dict[int, int] = {}  # destination id -> most jobs it may offer
        due: dict[int, list[_Due]] = {}  # destination id -> its claimable jobs read
        untried: set[int] = set()  # the job ids read with no attempt counted: no takeover
        for slot in slots:
            room = fair_room(request, slot["id"])
            if per_tenant is not None:  # a tenant at its share offers nothing
                room = min(room, per_tenant - request.held_tenants.get(slot["tenant_id"], 0))
            if slot["free"] <= 0 or room <= 0:
                continue
            if slot["rate_limit_per_s"] is not None:
                rates[slot["id"]] = (slot["rate_limit_per_s"], slot["next_send_at"])
            if slot["ordered"]:
                due[slot["id"]] = (yield from _ordered_due(slot["id"], now, untried,
                                                           request.max_attempts))
            else:
                offers[slot["id"]] = min(slot["free"], room)
        tenant_by_id = {slot["id"]: slot["tenant_id"] for slot in slots}
        chosen, _, waiting, status_of, takeovers = yield from self._choose(
            request, due, offers, tenant_by_id, rates=rates, now=now, per_tenant=per_tenant,
            untried=untried)
        if not chosen:
            return [], waiting
        # One UPDATE leases the chosen jobs. On PostgreSQL it skips one another transaction
        # holds (a late finish of an ordered destination's head, read unlocked).
        by_id = {r["id"]: r for r in (yield rows("claim_job", job_ids=chosen,
                                                  max_attempts=request.max_attempts,
                                                  worker=request.worker,
                                                  token_tag=request.token_tag,
                                                  lease_s=float(request.lease_s)))}
        leased = [by_id[job_id] for job_id in chosen if job_id in by_id]
        if not leased and request.may_take_over and any(j in takeovers for j in chosen):
            # The takeover chosen alone was skipped (another transaction holds it: a late
            # finish). Claim the other due jobs, reporting the takeover waiting, rather than
            # nothing until the next wake-up or poll.
            return (yield from self._claim_in(replace(request, may_take_over=False), deltas))
        # A rate-limited destination's next send moves on by the jobs leased, not chosen: a
        # job skipped is sent later at no cost of its destination's rate.
        for destination_id, next_send_at in _next_sends(rates, leased, now).items():
            yield count("advance_next_send", destination_id=destination_id,
                        next_send_at=next_send_at)
        job_ids = [r["id"] for r in leased]
        # A job whose previous claim's attempt never finished (its worker was lost: an expired
        # lease, or a replay of a job that died so) is taken over, and is sent in quarantine.
        # A job with no attempt counted before this claim (untried_job) has none that could
        # be open or lost: ask only about the others.
        tried = [r for r in leased  # attempts counts this claim's
                 if not untried_job(status_of[r["id"]], r["attempts"] - 1, r["replays"])]
        taken_over = {r["job_id"] for r in (yield rows(
            "mark_attempt_lost", job_ids=[r["id"] for r in tried],
            lease_tokens=[r["lease_token"] for r in tried]))} if tried else set()
        for r in leased:
            deltas.jobs(r["destination_id"], status_of[r["id"]], "running")
            deltas.attempts(r["destination_id"], None, IN_FLIGHT)
            if r["id"] in taken_over:  # its lost attempts were closed just now
                deltas.attempts(r["destination_id"], IN_FLIGHT, "worker_lost",
                                takeovers.get(r["id"], 0))
        yield count("insert_attempt", worker=request.worker, claims=Rows(
            ("job_ids", "attempts", "lease_tokens"),
            [(r["id"], r["attempts"], r["lease_token"]) for r in leased]))
        details = {d["job_id"]: d for d in (yield rows("claim_details", job_ids=job_ids))}
        gating = _gating(request, slots, leased, per_tenant, tenant_by_id)
        claims: list[Claim] = []
        for r in leased:
            try:
                stored = _StoredValues.read(details[r["id"]], now)
            except UnreadableRow as exc:
                # A stored value no request can be made of (written by hand), rather than
                # failing every claim it is in and stopping all delivery: the event's own
                # value kills this job now; the destination's would fail each of its jobs
                # alike, so it is paused instead and the job handed back, none lost.
                if exc.column in DESTINATION_COLUMNS:
                    yield from _pause_unreadable(r, details[r["id"]], str(exc), now, deltas,
                                                 self.notify)
                else:
                    yield from _fail_unreadable(r, details[r["id"]], request.worker,
                                                str(exc), now, deltas)
                continue
            claims.append(_claim_from(r, details[r["id"]], stored, request.worker,
                                      r["id"] in taken_over,
                                      gates_next=r["id"] in gating or r["id"] in taken_over))
        # Where a commit is not synced (a worker's, on SQLite), a power loss may undo it and
        # send its jobs again: a duplicate, which receivers drop by webhook-id. Two kinds of
        # job it must not be: an ordered destination's (the undone commits may hold earlier
        # jobs' finishes too, which would then arrive after later ones) and an operational
        # event (made by an undone commit, it would vanish after being announced, and come
        # back under a new id). Their claims are synced before they are sent.
        ordered = {slot["id"] for slot in slots if slot["ordered"]}
        if any(c.destination_id in ordered or is_operational(c.event_type) for c in claims):
            yield DURABLE
        return claims, waiting

    def _choose(self, request: ClaimRequest, due: dict[int, list[_Due]],
                offers: Mapping[int, int], tenant_by_id: Mapping[int, str], *,
                rates: Mapping[int, tuple[float, float]], now: float, per_tenant: int | None,
                untried: set[int] | None = None
                ) -> Tx[tuple[list[int], dict[int, float], bool, dict[int, str], dict[int, int]]]:
        """Reads the due jobs of `offers` (into `due`, which holds the ordered destinations'
        heads already) and chooses among them: each destination's pending jobs first up to
        _pending_bound, then in full those whose unread jobs could change the choice, until
        none could (one more read at most, in practice: the choice is exactly the full
        read's, tests/unit/test_claim_read_bound.py). A claim that takes a job over reads in
        full first (the lowest id among the takeovers is taken); a takeover beyond the first
        read is found once it is read, as one beyond a destination's offer always was.

        `untried`: the ids of the jobs in `due` with no attempt counted (untried_job), to
        which this adds those it reads; takeovers_among is not asked about them.

        Returns (the chosen job ids, the rate-limited destinations' next_send_at, whether a
        takeover is left waiting, each candidate's status, {job id: its attempts still open}
        of the jobs a claim would take over).
        """
        ties = self.DUE_TIES_IN_ID_ORDER
        untried = set() if untried is None else untried
        read_short = yield from _read_due(due, offers, _pending_bound(request.limit, offers),
                                          ties, untried, request.max_attempts)
        # An expired lease kept among a destination's candidates, but not before its last
        # pending job read, might be pushed out of its offer by the jobs left unread (it
        # would then not be a candidate, nor a takeover reported waiting): read those in full.
        if unsure := _lease_past_read(due, read_short):
            read_short = yield from _read_due(due, {d: offers[d] for d in unsure}, None, ties,
                                              untried, request.max_attempts, read_short)
        takeovers: dict[int, int] = {}
        asked: set[int] = set()  # the job ids takeovers_among has answered for
        while True:
            # (late retry?, due since, job id, destination id): fresh work sorts first.
            candidates: list[tuple[bool, float, int, int]] = []
            status_of: dict[int, str] = {}  # each candidate's status now (pending, or running)
            tenant_of: dict[int, str] = {}  # destination id -> tenant, of those offering jobs
            for destination_id, jobs in due.items():
                for job_id, due_at, attempts, status in jobs:
                    status_of[job_id] = status
                    late = request.late_after is not None and attempts >= request.late_after
                    candidates.append((late, due_at, job_id, destination_id))
                    tenant_of[destination_id] = tenant_by_id[destination_id]
            # The quarantine: a job taken over is claimed alone, by a worker that holds nothing.
            unasked = [c[2] for c in candidates if c[2] not in asked and c[2] not in untried]
            if unasked:
                takeovers.update({r["job_id"]: int(r["open_attempts"] or 0) for r in (
                    yield rows("takeovers_among", job_ids=unasked))})
                asked.update(unasked)
            # Tenants take turns only when there are several to choose between.
            several = per_tenant is not None or len(set(tenant_of.values())) > 1
            turns = tenant_of if several else None
            # Only the candidates': a read in full may push a job read before out of its
            # destination's offer.
            offered = {j: n for j, n in takeovers.items() if j in status_of}
            chosen, next_send, waiting = choose_with_takeovers(
                candidates, set(offered), request, rates=rates, now_s=now,
                tenants=turns, per_tenant=per_tenant)
            took_over = request.may_take_over and any(j in offered for j in chosen)
            more = set(read_short) if took_over else unsettled_by_more(
                [c for c in candidates if c[2] not in offered], chosen,
                limit=request.limit, read_short=read_short, tenants=turns)
            if not more:
                return chosen, next_send, waiting, status_of, offered
            read_short = yield from _read_due(due, {d: offers[d] for d in more}, None, ties,
                                              untried, request.max_attempts, read_short)

    def _claim_window(self, request: ClaimRequest) -> Tx[list[int]]:
        """The destinations this claim considers (ids, ascending): at most `CLAIM_WINDOW`
        (or `request.limit` if larger) that offer work now, walked in id order from where
        this process's previous claim stopped, wrapping around; plus every destination
        holding an expired lease.

        Why a window: a claim takes at most `limit` jobs, but reading every live
        destination's slots and due jobs made its cost follow the destinations that exist
        (30,003 live destinations: p50 1.1 s against 29 ms with 3). The walk (claim_window)
        leapfrogs the live destinations and the pending jobs' destinations, one index search
        in each per step, so it never visits a paused destination or one without jobs one by
        one, and stops at the window's last offering destination: its cost follows the work
        it can take.
        Destinations the claim could not take from are left out before they cost a read or
        a lock: paused, nothing due, no free in-flight slot, rate limit not allowing, full
        for this worker (per_destination), their tenant at its share (per_tenant; on
        PostgreSQL a claim therefore never locks a capped tenant's destinations).

        Fairness: with no more offering destinations than the window (every installation
        below 64 busy destinations) the claim sees all of them and chooses exactly as before
        (tenants' turns, then destinations' turns, oldest first). With more, each claim sees
        the next window of the ring, and the next claim starts after it: every destination
        with due work is considered at least once every ceil(offering / window) claims of a
        worker, whatever its id, its tenant or its age, and within a window the choice is
        the usual one, so a destination left out of a claim keeps its oldest job as its head
        while the served ones move on to younger jobs, and wins its turn in a later pass (no
        starvation: tests/unit/test_claim_window.py). Oldest-first
        across the whole installation is given up beyond the window: finding the oldest due
        job of every destination is the per-destination read this removes (a maintained
        per-destination next-due instant would cost ingest a destination write per job).
        """
        window = max(self.CLAIM_WINDOW, request.limit)
        full = ([d for d, n in request.held.items() if n >= request.per_destination]
                if request.per_destination is not None else [])
        capped = ([t for t, n in request.held_tenants.items() if n >= request.per_tenant]
                  if request.per_tenant is not None else [])

        def walk(after: int, upto: int, most: int, expired: bool) -> Query:
            return rows("claim_window", after=after, upto=upto, window=most, expired=expired,
                        full_destinations=full, capped_tenants=capped)

        start = self._claim_cursor
        found = list((yield walk(start, _NO_ID_BOUND, window, True)))
        walked = [r["id"] for r in found if r["walked"]]
        expired = [r["id"] for r in found if not r["walked"]]
        last = max(walked, default=0)
        if len(walked) < window and start > 0:  # the ring's end: go on from its start
            wrapped = [r["id"] for r in (yield walk(0, start, window - len(walked), False))]
            walked += wrapped
            last = max(wrapped, default=0)
        # A full window: more may offer beyond it, and the next claim starts there.
        self._claim_cursor = last if len(walked) >= window else 0
        return sorted({*walked, *expired})


_Due = tuple[int, float, int, str]  # a claimable job: id, due since, attempts made, status


def _next_sends(rates: Mapping[int, tuple[float, float]], leased: Sequence[Any],
                now: float) -> dict[int, float]:
    """The new next_send_at (unix s) of each rate-limited destination (`rates`: id ->
    (per second, stored next_send_at)) with jobs among `leased`: spaced from the stored
    value by one interval per job leased, as the choice spaced the jobs it chose."""
    leased_of = Counter(r["destination_id"] for r in leased if r["destination_id"] in rates)
    moved: dict[int, float] = {}
    for destination_id, jobs in leased_of.items():
        rate_per_s, next_send_at = rates[destination_id]
        for _ in range(jobs):
            next_send_at = next_send_after(next_send_at, now, rate_per_s)
        moved[destination_id] = next_send_at
    return moved


def _pending_bound(limit: int, offers: Mapping[int, int]) -> int | None:
    """The most pending jobs a claim first reads of each destination in `offers`: two more
    than an even share of its `limit` (with many destinations offering, each wins a turn or
    two, where its offer may be 16 or 32); None (read each one's whole offer) when that
    would not halve the largest offer."""
    if not offers:
        return None
    bound = -(-limit // len(offers)) + 2
    return bound if 2 * bound <= max(offers.values()) else None


def _read_due(due: dict[int, list[_Due]], offers: Mapping[int, int], bound: int | None,
              ties_in_id_order: bool, untried: set[int], max_attempts: int,
              read_short: Mapping[int, tuple[float, int | None]] | None = None
              ) -> Tx[dict[int, tuple[float, int | None]]]:
    """Reads the claimable jobs of the destinations in `offers` (destination id -> most jobs
    it offers) into `due`, each one's oldest due first, in one query: its pending jobs up to
    `bound` (None: its whole offer), its expired leases up to its offer (not those at
    `max_attempts`: kill_lost_at_cap ends them, see _ordered_due). Adds to `untried`
    the ids of those with no attempt counted (:func:`untried_job`).

    Returns `read_short` with these destinations' entries replaced: each destination whose
    pending read stopped at the bound below its offer, with its last pending job read: (its
    due time in unix seconds, its id if `ties_in_id_order`, else None). Every pending job
    left unread is due then or later (and if as late, has a higher id when the ids are
    given); see :func:`hookline.shared.policy.delivery.unsettled_by_more`."""
    short = {d: latest for d, latest in (read_short or {}).items() if d not in offers}
    if not offers:
        return short
    most = max(offers.values())
    pending_limit = most if bound is None else min(bound, most)
    found = yield rows("due_jobs", limit=most, pending_limit=pending_limit,
                       max_attempts=max_attempts, offers=Rows(
        ("destination_ids", "limits"), sorted(offers.items())))
    by_destination: dict[int, list[tuple[float, int, int, str]]] = {d: [] for d in offers}
    pending: dict[int, list[tuple[float, int]]] = {}  # destination id -> its pending read
    for r in found:
        by_destination[r["destination_id"]].append(
            (r["due_at"], r["id"], r["attempts"], r["status"]))
        if untried_job(r["status"], r["attempts"], r["replays"]):
            untried.add(r["id"])
        if r["status"] == "pending":
            pending.setdefault(r["destination_id"], []).append((r["due_at"], r["id"]))
    for destination_id, jobs in by_destination.items():
        offer = offers[destination_id]
        due[destination_id] = [(job_id, due_at, attempts, status)
                               for due_at, job_id, attempts, status in sorted(jobs)[:offer]]
        read = pending.get(destination_id, [])
        if len(read) >= pending_limit and pending_limit < offer:
            last_due, last_id = max(read)
            short[destination_id] = (last_due, last_id if ties_in_id_order else None)
    return short


def untried_job(status: str, attempts: int, replays: int) -> bool:
    """Whether a job has no attempt counted (pending, `attempts` 0, never replayed: never
    claimed, or every claim of it handed back), so none of its attempts can be open or
    closed "worker lost": it is not a takeover, and the claim asks neither takeovers_among
    nor mark_attempt_lost about it (one statement each fewer per claim of fresh work). Every
    attempt row is made by a claim, which counts it in `attempts`; only a hand-back takes
    the count back, closing that attempt in the same transaction; a replay (or resend)
    resets `attempts` but counts in `replays`."""
    return status == "pending" and attempts == 0 and replays == 0


def _lease_past_read(due: Mapping[int, list[_Due]],
                     read_short: Mapping[int, tuple[float, int | None]]) -> set[int]:
    """The destinations of `read_short` (see _read_due) whose candidates in `due` hold an
    expired lease that does not sort before the last pending job read (due earlier, or as
    early with a lower id when ids are known): jobs left unread might sort before it."""
    unsure = set()
    for destination_id, (last_due, last_id) in read_short.items():
        for job_id, due_at, _, status in due[destination_id]:
            before = due_at < last_due or (last_id is not None and due_at == last_due
                                           and job_id < last_id)
            if status == "running" and not before:
                unsure.add(destination_id)
    return unsure


def _ordered_due(destination_id: int, now: float, untried: set[int],
                 max_attempts: int) -> Tx[list[_Due]]:
    """(job id, due since, attempts made, status) of an ordered destination's claimable job:
    only its oldest unfinished job, and only when that job is due (pending with run_at
    passed, or running with an expired lease and attempts left); its id goes into `untried`
    when it has no attempt counted (untried_job).

    An expired lease at `max_attempts` is never taken over: its worker died on the last
    attempt (perhaps of it), and kill_lost_at_cap ends it. On PostgreSQL that statement
    skips a job another transaction holds, which may let go of it unchanged before this
    read (a late finish rolled back, a destination turning ordered)."""
    head = yield one("ordered_head", destination_id=destination_id)
    if head is None:
        return []
    if head["status"] == "pending" and head["run_at"] <= now:
        if untried_job("pending", head["attempts"], head["replays"]):
            untried.add(head["id"])
        return [(head["id"], head["run_at"], head["attempts"], "pending")]
    if (head["status"] == "running" and head["lease_until"] <= now
            and head["attempts"] < max_attempts):
        return [(head["id"], head["lease_until"], head["attempts"], "running")]
    return []


def _gating(request: ClaimRequest, slots: list[Any], leased: list[Any],
            per_tenant: int | None, tenant_of: Mapping[int, str]) -> set[int]:
    """The leased jobs (ids) whose result the next claim of their kind waits for
    (Claim.gates_next): every job of a destination that is ordered (one job at a time), or
    whose room this claim used up: its free `max_in_flight` slots, this worker's share of it
    (`per_destination`) or of its tenant (`per_tenant`, None: no tenant share now); and the
    late retries, once they fill the late-retry reservation (`max_late`). `tenant_of`: each
    slot's destination id -> its tenant."""
    by_destination = Counter(r["destination_id"] for r in leased)
    by_tenant = Counter(tenant_of[r["destination_id"]] for r in leased)
    full: set[int] = set()
    for slot in slots:
        destination_id, tenant = slot["id"], slot["tenant_id"]
        taken = by_destination[destination_id]
        if not taken:
            continue
        # The destination's room, not the claim's: a claim that reached its own limit
        # (request.limit: the worker's free slots, at most claim_batch) first leaves the
        # destination room for its next job.
        share = share_left(request, destination_id)
        room = slot["free"] if share is None else min(slot["free"], share)
        tenant_full = (per_tenant is not None and
                       request.held_tenants.get(tenant, 0) + by_tenant[tenant] >= per_tenant)
        if slot["ordered"] or taken >= room or tenant_full:
            full.add(destination_id)
    gating = {r["id"] for r in leased if r["destination_id"] in full}
    if request.late_after is not None and request.max_late is not None:
        # attempts counts this claim's attempt: a late retry had late_after failures before.
        late = [r["id"] for r in leased if r["attempts"] - 1 >= request.late_after]
        if late and len(late) >= request.max_late:
            gating.update(late)
    return gating


class UnreadableRow(Exception):
    """A claimed job's stored row holds a value no request can be made of (only a hand edit
    of the database leaves one); the message names the column and the problem, `column`
    the column alone."""

    def __init__(self, column: str, problem: str) -> None:
        super().__init__(f"{column}: {problem}")
        self.column = column


DESTINATION_COLUMNS = frozenset({"headers", "previous_secret_until"})
"""The columns of claim_details that are the destination's own, not its event's: every job
of the destination would meet the same unreadable value."""


class _StoredValues(NamedTuple):
    """What a claim parses from its job's stored row (claim_details)."""

    secrets: tuple[str, ...]
    headers: tuple[tuple[str, str], ...]
    forwarded_headers: tuple[tuple[str, str], ...]
    body: bytes

    @classmethod
    def read(cls, details: Any, now: float) -> _StoredValues:
        """Parse the row's stored values; `now`: the store's clock, unix seconds.

        Raises:
            UnreadableRow: one of them cannot be read (the column is named).
        """
        column = "headers"  # the one being read, for the message
        try:
            headers = parse_headers(details["headers"])
            column = "forwarded_headers"
            forwarded = forwarding.decode(details["forwarded_headers"])
            column = "body"
            body = _body(details)
            column = "previous_secret_until"
            secrets: tuple[str, ...] = (details["secret"],)
            if details["previous_secret"] and (details["previous_secret_until"] or 0) > now:
                secrets += (details["previous_secret"],)
        except (ValueError, TypeError, AttributeError) as exc:
            raise UnreadableRow(column, f"{type(exc).__name__}: {exc}") from exc
        return cls(secrets, headers, forwarded, body)


def _log_lost_at_cap(dead: Sequence[Mapping[str, Any]], worker: str) -> None:
    """A job_dead line for each job kill_lost_at_cap ended (as a worker logs one it
    finishes dead), `worker` the one whose claim found it."""
    for r in dead:
        log.warning("job_dead", job_id=r["id"], event_id=r["event_id"],
                    destination=r["destination"], tenant=r["tenant"], attempt=r["attempts"],
                    reason=LOST_AT_CAP, found_by=worker)


def _fail_unreadable(row: Any, details: Any, worker: str, problem: str, now: float,
                     deltas: MetricDeltas) -> Tx[None]:
    """Finish the job of the leased `row` as dead (UnreadableRow: `problem`), log it after
    the commit (job_unreadable), and wake a worker: the claim took fewer jobs than it could,
    so its worker would otherwise wait for its next poll."""
    claim = Claim(job_id=row["id"], event_id=row["event_id"], message_id="", event_type="",
                  destination_id=row["destination_id"], destination_name="", url="", secret="",
                  body=b"", attempt=row["attempts"], lease_token=row["lease_token"],
                  lease_owner=worker, lease_until=row["lease_until"])
    error = f"{UNREADABLE_PREFIX}{problem}"
    yield from fail_unsendable_tx(claim, error, now, deltas)
    yield NOTIFY
    yield AfterCommit(lambda: log.error("job_unreadable", job_id=row["id"],
                                        event_id=row["event_id"],
                                        destination=details["name"],
                                        tenant=details["tenant_id"], error=error))


def _pause_unreadable(row: Any, details: Any, problem: str, now: float,
                      deltas: MetricDeltas, notify: NotifyPolicy) -> Tx[None]:
    """The destination of the leased `row` holds a value no request can be made of
    (UnreadableRow: `problem`, a destination column): close the attempt with that reason,
    hand the job back uncharged, and pause the destination with it (announced as any pause
    is, and logged `destination_auto_paused` after the commit). Its jobs so wait, none of
    them dead, until the value is fixed and the destination resumed. `now`: the store's
    clock, unix seconds.

    A job this claim took over comes back as an ordinary pending job: its quarantine (sent
    alone) is not kept through the pause. Should it be a poison job, the next worker it
    kills leaves its attempt open, and the claim after that takes it over alone again."""
    reason = f"{UNREADABLE_PREFIX}{problem}"
    destination_id = row["destination_id"]
    closed = yield rows("record_attempt", lease_token=row["lease_token"], started_at=now,
                        duration_s=0.0, status_code=None, error=reason,
                        response_excerpt=None, response_headers=None, location=None)
    for attempt in closed:
        if not attempt["was_lost"]:
            deltas.attempts(destination_id, IN_FLIGHT, outcome_class(reason, None))
    if (yield count("hand_back", job_id=row["id"], lease_token=row["lease_token"])):
        deltas.jobs(destination_id, "running", "pending")
    paused = yield one("pause_unreadable", destination_id=destination_id, reason=reason)
    if paused is None:  # already paused, by an earlier job of it in this claim
        return
    yield NOTIFY  # the claim took fewer jobs than it could (as _fail_unreadable)
    yield from notify_tx.paused_tx(notify, paused, reason)
    name, tenant = details["name"], details["tenant_id"]
    yield AfterCommit(lambda: log.error("destination_auto_paused", destination=name,
                                        tenant=tenant, reason=reason, job_id=row["id"]))


def _claim_from(row: Any, details: Any, stored: _StoredValues, worker: str,
                taken_over: bool, *, gates_next: bool = False) -> Claim:
    """A Claim from its leased job row, its claim_details row and their parsed values."""
    return Claim(
        job_id=row["id"], event_id=row["event_id"], message_id=details["message_id"],
        event_type=details["type"], destination_id=row["destination_id"],
        destination_name=details["name"], url=details["url"], secret=details["secret"],
        body=stored.body, attempt=row["attempts"], lease_token=row["lease_token"],
        lease_owner=worker, lease_until=row["lease_until"], taken_over=taken_over,
        secrets=stored.secrets, timeout_s=details["timeout_s"], headers=stored.headers,
        forwarded_headers=stored.forwarded_headers,
        tenant_id=details["tenant_id"], received_at=details["received_at"],
        trace_context=details["trace_context"],
        propagate_trace=bool(details["propagate_trace"]), gates_next=gates_next)


def _body(details: Any) -> bytes:
    """The bytes to send: the stored body, or for an operational event to a destination with
    body_format `slack`, the chat tool's `{"text": ...}` (shared/policy/notify.py)."""
    stored = details["body"]
    # A body stored as SQLite TEXT (a row written by hand, not by hookline) is its UTF-8
    # bytes. A number is no body (bytes(5) would send five NULs): the claim fails the job.
    if isinstance(stored, str):
        body = stored.encode()
    elif isinstance(stored, bytes | bytearray | memoryview):
        body = bytes(stored)
    else:
        raise TypeError(f"the stored body is a {type(stored).__name__}, not bytes")
    if details["body_format"] == "slack" and is_operational(details["type"]):
        return chat_body(body)
    return body
