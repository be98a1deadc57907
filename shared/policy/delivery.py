"""Delivery policy decisions that are not retries: pure functions, no I/O.

- :func:`auto_pause_reason`: the circuit breaker and 410 Gone (a destination is paused with a
  recorded reason; the store applies it inside `finish`).
- :func:`rate_limit_allows` / :func:`next_send_after`: the per-destination rate limit as a
  GCRA ("virtual scheduling") with a burst of one second's worth of requests; the store keeps
  `next_send_at` (the theoretical arrival time) per destination and advances it in the claim
  transaction, so the limit holds across every worker process.
- :func:`choose_claims`: which due jobs one claim takes (fresh work first, the late-retry
  reservation, rate limits), the same on both backends; :func:`choose_with_takeovers` puts
  the poison-job quarantine on top (a takeover is claimed alone, or skipped and reported).
- :func:`late_slots`: how many of a worker's slots late retries may hold (reserved capacity).
- :func:`destination_slots`: how many of a worker's slots one destination may hold (fair
  share), whatever its max_in_flight; :func:`tenant_slots` the same for one tenant.
- :func:`effective_timeout_s`: a destination's attempt timeout, kept below the lease.
- :func:`unsendable_header`: a request header that cannot go on the wire (the job fails
  permanently instead of retrying what can never be sent).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from hookline.shared.models import AttemptResult, ClaimRequest
from hookline.shared.policy.rules import header_problem

GONE = 410


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerPolicy:
    """When a failing destination is auto-paused.

    Attributes:
        failures: consecutive failed attempts that trip the breaker, once the run has also
            lasted `min_span_s`; 0 disables this trigger.
        min_span_s: shortest failure run, seconds, that `failures` may trip (so a burst, such
            as a backlog's first attempts all failing within a minute, does not).
        window_s: seconds of failing without a single success that trip it; 0 disables.
        pause_on_gone: a 410 Gone pauses the destination at once.
    """

    failures: int = 100
    window_s: float = 86400.0
    min_span_s: float = 300.0
    pause_on_gone: bool = True


def is_failure(result: AttemptResult) -> bool:
    """True unless the attempt got a 2xx (every other result counts toward the breaker)."""
    return result.status_code is None or not 200 <= result.status_code < 300


def auto_pause_reason(result: AttemptResult, url: str, streak: int,
                      failing_since: float | None, now_s: float,
                      policy: BreakerPolicy) -> str | None:
    """Decide whether this attempt's result pauses its destination.

    Args:
        result: the attempt just made.
        url: the destination URL (for the reason text).
        streak: consecutive failed attempts INCLUDING this one (0 after a success).
        failing_since: unix seconds of the first failure of the current run, or None.
        now_s: current unix time, seconds.
        policy: the thresholds.

    Returns:
        The paused_reason to record, or None to leave the destination running.
    """
    if not is_failure(result):
        return None
    if policy.pause_on_gone and result.status_code == GONE:
        return f"410 Gone from {url}"
    span_s = 0.0 if failing_since is None else now_s - failing_since
    if policy.failures and streak >= policy.failures and span_s >= policy.min_span_s:
        return f"circuit breaker: {streak} consecutive failed attempts"
    if policy.window_s and failing_since is not None and now_s - failing_since >= policy.window_s:
        return (f"circuit breaker: failing for {now_s - failing_since:.0f} s "
                f"(>= {policy.window_s:.0f} s) without a success")
    return None


UNREADABLE_PREFIX = "UnreadableRow: "
"""How the reason begins when a claim paused a destination whose own stored value no
request can be made of (shared/store/claim_tx.py)."""
AUTO_PAUSE_PREFIXES = ("410 Gone from ", "circuit breaker: ", UNREADABLE_PREFIX)
"""How every reason of an automatic pause begins: :func:`auto_pause_reason`'s, and a
claim's that met an unreadable destination."""


def pause_kind(paused_reason: str | None) -> str:
    """`auto` when a paused destination's reason is the circuit breaker's or a 410's (see
    :func:`auto_pause_reason`), or a claim's that found its stored values unreadable, else
    `manual` (an operator's pause, with or without text)."""
    if paused_reason is not None and paused_reason.startswith(AUTO_PAUSE_PREFIXES):
        return "auto"
    return "manual"


def rate_limit_allows(next_send_at: float, now_s: float, rate_per_s: float | None) -> bool:
    """True when one more request may be claimed now (GCRA, burst = one second's worth).

    Args:
        next_send_at: the destination's theoretical arrival time, unix seconds (0 = never sent).
        now_s: current unix time, seconds.
        rate_per_s: requests per second, or None for no limit.
    """
    if rate_per_s is None:
        return True
    burst_s = max(0.0, 1.0 - 1.0 / rate_per_s)
    return next_send_at <= now_s + burst_s


def choose_claims(candidates: Sequence[tuple[bool, float, int, int]], *, limit: int,
                  max_late: int | None, rates: Mapping[int, tuple[float, float]],
                  now_s: float, per_destination: int | None = None,
                  held: Mapping[int, int] | None = None,
                  tenants: Mapping[int, str] | None = None, per_tenant: int | None = None,
                  held_tenants: Mapping[str, int] | None = None
                  ) -> tuple[list[int], dict[int, float]]:
    """Which of the due jobs one claim takes.

    Args:
        candidates: (late retry?, due since in unix seconds, job id, destination id) of every
            due job offered (each destination offers at most its free slots, oldest first).
            Fresh work comes before late retries; within each, tenants take turns (each
            tenant's first job, then each one's second, ...), and within a tenant its
            destinations take turns (each one's oldest, then each one's second oldest, ...;
            older first within a turn), so neither a tenant with a deep backlog over many
            destinations nor a destination recovering from an outage can delay everybody
            else's fresh events.
        limit: most jobs to take.
        max_late: most late retries to take (None = no reservation).
        rates: destination id -> (rate_limit_per_s, next_send_at in unix seconds) for the
            rate-limited destinations among them.
        now_s: unix seconds.
        per_destination: most slots of the claiming worker one destination may hold (the
            fair share, :func:`destination_slots`); None = no cap.
        held: destination id -> slots of the claiming worker it holds already.
        tenants: destination id -> its tenant, for the destinations offered; None (or a
            destination missing from it): one tenant for all.
        per_tenant: most slots of the claiming worker one tenant may hold (:func:`tenant_slots`);
            None = no cap.
        held_tenants: tenant -> slots of the claiming worker it holds already.

    Returns:
        (the chosen job ids in claim order, destination id -> its new next_send_at for each
        rate-limited destination that got a job).
    """
    chosen: list[int] = []
    next_send: dict[int, float] = {}
    late_taken = 0
    holding = dict(held or {})  # destination -> the worker's slots it holds, with this claim
    tenant_holding = dict(held_tenants or {})  # tenant -> the same
    tenant_of = tenants or {}
    for late, _, _, job_id, destination_id in _turns(candidates, tenant_of):
        if len(chosen) >= limit:
            break
        if late and max_late is not None and late_taken >= max_late:
            continue
        if per_destination is not None and holding.get(destination_id, 0) >= per_destination:
            continue
        tenant = tenant_of.get(destination_id, "")
        if per_tenant is not None and tenant_holding.get(tenant, 0) >= per_tenant:
            continue
        if destination_id in rates:
            rate_per_s, next_send_at = rates[destination_id]
            next_send_at = next_send.get(destination_id, next_send_at)
            if not rate_limit_allows(next_send_at, now_s, rate_per_s):
                continue
            next_send[destination_id] = next_send_after(next_send_at, now_s, rate_per_s)
        chosen.append(job_id)
        late_taken += late
        holding[destination_id] = holding.get(destination_id, 0) + 1
        tenant_holding[tenant] = tenant_holding.get(tenant, 0) + 1
    return chosen, next_send


def unsettled_by_more(candidates: Sequence[tuple[bool, float, int, int]],
                      chosen: Collection[int], *, limit: int,
                      read_short: Mapping[int, tuple[float, int | None]],
                      tenants: Mapping[int, str] | None = None) -> set[int]:
    """The destinations of `read_short` whose unread due jobs could change
    :func:`choose_claims`' choice (so the claim reads them and chooses again).

    A claim reads each destination's pending jobs only up to a bound (the turns it can win
    are few when many destinations offer work); `read_short` holds the destinations whose
    read stopped at that bound, each with the last job read: (its due time in unix seconds,
    its id when the store reads equal due times in id order, else None). Every job left
    unread sorts after it (due later, or as late with a higher id), or with None, is due at
    that time or later. The choice is exactly the one all jobs would give when the claim's
    `limit` was reached and each such destination has a fresh job that sorts before every
    unread one and comes after the last chosen job in claim order: each unread job sorts
    after that job, every candidate before the cut keeps its place (a tenant's turns count
    only its earlier jobs), and the choice ends at the cut.

    Args:
        candidates: as :func:`choose_claims` took them.
        chosen: the job ids it chose from them.
        limit: the `limit` it chose with.
        read_short: destination id -> (due time, id or None) of the last job read of it.
        tenants: the `tenants` it chose with.

    Returns:
        The destinations of `read_short` to read in full; empty when the choice stands.
    """
    if not read_short:
        return set()
    if not chosen or len(chosen) < limit:
        return set(read_short)
    taken = set(chosen)
    order = _turns(candidates, tenants or {})
    cut = max(i for i, turn in enumerate(order) if turn[3] in taken)
    due_at = {job_id: due for _, due, job_id, _ in candidates}

    def before_the_unread(job_id: int, destination_id: int) -> bool:
        last_due, last_id = read_short[destination_id]
        if last_id is None:
            return due_at[job_id] < last_due
        return (due_at[job_id], job_id) <= (last_due, last_id)

    settled = {destination_id for late, _, _, job_id, destination_id in order[cut + 1:]
               if not late and destination_id in read_short
               and before_the_unread(job_id, destination_id)}
    return set(read_short) - settled


def _turns(candidates: Sequence[tuple[bool, float, int, int]], tenant_of: Mapping[int, str]
           ) -> list[tuple[bool, int, int, int, int]]:
    """The candidates in claim order (see :func:`choose_claims`), each as (late?, tenant turn,
    destination turn, job id, destination id)."""
    destination_turn: dict[tuple[bool, int], int] = {}  # (late?, destination) -> offered so far
    by_destination = []
    for late, due_at, job_id, destination_id in sorted(candidates):
        rank = destination_turn.get((late, destination_id), 0)
        destination_turn[(late, destination_id)] = rank + 1
        by_destination.append((late, rank, due_at, job_id, destination_id))
    by_destination.sort()
    if not tenant_of:  # one tenant: its order is the destinations' turns
        return [(late, rank, rank, job_id, destination_id)
                for late, rank, _, job_id, destination_id in by_destination]
    tenant_turn: dict[tuple[bool, str], int] = {}  # (late?, tenant) -> its jobs so far
    ranked = []
    for late, rank, due_at, job_id, destination_id in by_destination:
        key = (late, tenant_of.get(destination_id, ""))
        turn = tenant_turn.get(key, 0)
        tenant_turn[key] = turn + 1
        ranked.append((late, turn, rank, due_at, job_id, destination_id))
    ranked.sort()
    return [(late, turn, rank, job_id, destination_id)
            for late, turn, rank, _, job_id, destination_id in ranked]


def choose_with_takeovers(candidates: Sequence[tuple[bool, float, int, int]],
                          takeovers: Collection[int], request: ClaimRequest, *,
                          rates: Mapping[int, tuple[float, float]], now_s: float,
                          tenants: Mapping[int, str] | None = None,
                          per_tenant: int | None = None
                          ) -> tuple[list[int], dict[int, float], bool]:
    """Which of the due jobs one claim takes when some would be taken over (their last
    worker was lost with them, maybe killed by them: a poison job).

    A claim that may take over (`request.may_take_over`: its worker holds nothing else once
    this transaction commits) takes exactly one takeover, the lowest job id :func:`choose_claims`
    allows (rate limits), and nothing else. Otherwise the takeovers are skipped and the rest
    chosen as :func:`choose_claims` does.

    Args:
        candidates: as :func:`choose_claims` takes them.
        takeovers: the job ids among them that would be taken over.
        request: the claim (limit, late-retry reservation, fair share, may_take_over).
        rates: as :func:`choose_claims` takes them.
        now_s: unix seconds.
        tenants: destination id -> tenant, as :func:`choose_claims` takes it.
        per_tenant: the tenant cap in force (the request's `per_tenant` when destinations of
            more than one tenant exist, else None).

    Returns:
        (the chosen job ids, the destinations' new next_send_at as :func:`choose_claims`
        returns them, whether a takeover is left waiting for a claim that may take it).
    """
    def choose(offered: list[tuple[bool, float, int, int]], limit: int
               ) -> tuple[list[int], dict[int, float]]:
        return choose_claims(offered, limit=limit, max_late=request.max_late, rates=rates,
                             now_s=now_s, per_destination=request.per_destination,
                             held=request.held, tenants=tenants, per_tenant=per_tenant,
                             held_tenants=request.held_tenants)

    if request.may_take_over:
        for job_id in sorted(takeovers):
            chosen, next_send = choose([c for c in candidates if c[2] == job_id], 1)
            if chosen:
                return chosen, next_send, len(takeovers) > 1
    chosen, next_send = choose([c for c in candidates if c[2] not in takeovers], request.limit)
    return chosen, next_send, bool(takeovers)


def next_send_after(next_send_at: float, now_s: float, rate_per_s: float | None) -> float:
    """The theoretical arrival time after claiming one request (unchanged without a limit)."""
    if rate_per_s is None:
        return next_send_at
    return max(next_send_at, now_s) + 1.0 / rate_per_s


def late_slots(concurrency: int, share: float) -> int:
    """Slots of a worker with `concurrency` slots that late retries may hold: at least 1."""
    return max(1, int(concurrency * share))


def destination_slots(concurrency: int, share: float) -> int:
    """Slots of a worker with `concurrency` slots that one destination may hold:
    ceil(concurrency * share), at least 1.

    Strict, even when the other slots are idle: a destination that starts hanging holds at
    most this many slots until its attempts time out, so the rest always serve the others
    at once. A destination alone still gets this share of every worker process."""
    return max(1, math.ceil(concurrency * share - 1e-9))


def tenant_slots(concurrency: int, share: float) -> int:
    """Slots of a worker with `concurrency` slots that one tenant may hold while destinations
    of more than one tenant exist: ceil(concurrency * share), at least 1.

    Strict like :func:`destination_slots`: a tenant whose endpoints all hang holds at most
    this many slots, so every other tenant's events find free slots at once. It does not
    apply while a single tenant has destinations (an installation without tenants keeps every
    slot)."""
    return max(1, math.ceil(concurrency * share - 1e-9))


def fair_room(request: ClaimRequest, destination_id: int) -> int:
    """How many more of the claiming worker's slots `destination_id` may take in this claim:
    its fair share left (:func:`share_left`), at most the request's `limit`; may be 0 or
    less."""
    share = share_left(request, destination_id)
    return request.limit if share is None else min(request.limit, share)


def share_left(request: ClaimRequest, destination_id: int) -> int | None:
    """How many more of the claiming worker's slots `destination_id` may hold under the
    request's fair share (`per_destination`, counting the `held` ones), whatever the claim's
    own `limit`; None when there is no cap. May be 0 or less."""
    if request.per_destination is None:
        return None
    return request.per_destination - request.held.get(destination_id, 0)


def effective_timeout_s(override_s: float | None, default_s: float, lease_s: float) -> float:
    """The total time one attempt may take: the destination's override or the default,
    kept below the lease (at most 90 % of `lease_s`), in seconds."""
    chosen = default_s if override_s is None else override_s
    return min(chosen, lease_s * 0.9)


def unsendable_header(headers: Iterable[tuple[str, str]]) -> str | None:
    """Why one of these request headers cannot be sent, naming it, or None when all can.

    The header rule of the rule book (:func:`hookline.shared.policy.rules.header_problem`), lenient
    toward stored rows: a name must be an RFC 9110 token; a value may not hold control
    characters other than tab (CR or LF would inject a header). The destination settings
    refuse such headers when they are saved (the strict form), but a value written before
    that check, or directly into the database, can still reach a worker; retrying it would
    fail the same way until the attempt cap.
    """
    for name, value in headers:
        if (problem := header_problem(name, value, stored=True)) is not None:
            return problem
    return None
