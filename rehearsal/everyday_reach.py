"""Which everyday targets stay out of reach once hookline's own work beside the HTTP is
counted at its flat-out cost.

`hookline bench --scenario everyday` (rehearsal/scenario_everyday.py, issue #33 target 1)
measures at each steady rate what a bare aiohttp server and client cost per request
(rehearsal/everyday_floor.py). Its `out_of_reach` names the targets the bare HTTP alone
already misses. This module adds the rest of what hookline does per item (store the event
and its jobs; claim, record and finish each delivery; validation, metrics) at the least cost
per item hookline pays for it, which is flat out: its flat-out cost less the bare HTTP's
flat-out cost. Arriving one event at a time that work costs more per item, not less (a
statement costs about as much for 3 rows as for 30, and a transaction's fixed cost is spread
over fewer items; docs/benchmarks.md, "Commits 5 ms apart under a trickle").

What it proves, and its premises: a cost target is a ratio to the design's own flat-out
cost, so a design slower flat out meets it more easily. For a design no slower flat out
than hookline is today (H below), whose work beside the HTTP costs at the rate at least
what hookline's costs flat out (B below), the steady / flat-out ratio is at least the least
ratio below; where that exceeds the target, the target is out of reach for it. Another
design could do that work more cheaply than hookline; the figure is hookline's, not a law.

For a cost target, with H hookline's flat-out cost per item, A the bare HTTP's cost at the
rate over H, and S the bare HTTP's cost at the rate over its own flat-out cost:

* the bare HTTP's flat-out cost is A x H / S, so the work beside it flat out is
  B = H (1 - A / S);
* the least cost at the rate is A x H + B, and the least ratio to H is A + 1 - A / S.

At the target rate, the service's least cores are the bare HTTP's cores plus the rate times
one event's work (ingest's B and ENDPOINTS deliveries' B), an absolute bound; Huey's CPU per
delivery over the least CPU per delivery (the bare server's cost per request over ENDPOINTS,
the bare client's, and the work of one delivery and its share of an event) is the most its
ratio could be. Each bound is the median of the rounds' own (each round's A, S and H), as
each check is the median of the rounds' ratios.

bench_table always computes it from a file's rounds and medians (a file written before this
module carries none), which is all this needs.

durable_reach needs neither premise about the bookkeeping: it takes the least durable
service's own cost at the rate (rehearsal/everyday_floor.py, durable_floor: the events
stored with their jobs before the 202, each delivery marked when its 2xx came, nothing
else), measured in the same round. It keeps the first premise (no slower flat out than
hookline) for the cost ratios, and its service cores and Huey's ratio are absolute: each
bounds a design on aiohttp and SQLite, on this machine, that does that work no more cheaply
than the floor does (one process serving, one sending, one SQLite file).

Its `with_own_work` joins the two: the floor's cost at the rate plus what a design costs
flat out beyond the floor's flat-out cost, at that flat-out cost per item (H - Ff, both
measured in the round). The least ratio to H is then (F + H - Ff) / H = 1 + (F - Ff) / H:
what arriving one event at a time adds to the floor's own cost, on top of a design as fast
flat out as hookline. Its premises: no slower flat out than hookline, and everything a
design costs flat out above the floor's flat-out cost (work the floor does not do, or the
floor's work done less cheaply) costs it no less per item arriving one event at a time than
in batches. Where hookline is cheaper flat out than the floor (H < Ff) there is no bound.
"""

from __future__ import annotations

import statistics
from typing import Any

from hookline.rehearsal.everyday_floor import ENDPOINTS, ratio

SIDES = {"ingest_cpu": ("server", "ingest_cpu_ms_per_event"),
         "workers_cpu": ("client", "workers_cpu_ms_per_delivery")}
"""Each cost target's bare process and hookline's flat-out figure (ms per event or delivery)."""


DURABLE_SIDES = {"ingest_cpu": ("ingest_cpu_ms_per_event", "ingest_cpu_ms_per_event"),
                 "workers_cpu": ("deliverer_cpu_ms_per_delivery", "workers_cpu_ms_per_delivery")}
"""Each cost target's figure of the least durable service (rehearsal/everyday_floor.py,
durable_floor) and hookline's flat-out figure it is divided by."""


def least_ratio(vs_hookline: float | None, vs_own: float | None) -> float | None:
    """The least steady / flat-out cost ratio (3 decimals) of a design whose HTTP costs the
    bare one's and whose bookkeeping per item costs at least hookline's flat out: A + 1 - A/S
    (module doc; `vs_hookline` is A, `vs_own` is S). None when either is missing or S is 0."""
    books = bookkeeping_ms(1.0, vs_hookline, vs_own)  # B / H
    return None if books is None or vs_hookline is None else round(vs_hookline + books, 3)


def bookkeeping_ms(flat_ms: float | None, vs_hookline: float | None,
                   vs_own: float | None) -> float | None:
    """hookline's flat-out cost per item (`flat_ms`, ms) less the bare HTTP's flat-out cost:
    H (1 - A / S), at least 0. None when a figure is missing."""
    if flat_ms is None or vs_hookline is None or not vs_own:
        return None
    return max(0.0, flat_ms * (1 - vs_hookline / vs_own))


def out_of_reach_beyond(bounds: dict[str, dict[str, Any]], alone: set[str],
                       checks: dict[str, bool]) -> list[str]:
    """The targets `bounds` (from :func:`reach`) puts out of reach beyond `alone` (those the
    bare HTTP alone does), none of them met (a met check out of reach would show a premise
    wrong), sorted."""
    return sorted(name for name, out in bounds["out_of_reach"].items()
                  if out and name not in alone and not checks.get(name))


def least_of(least: dict[str, Any], prefix: str) -> float | None:
    """The least figure of the target whose name starts with `prefix` (None if absent)."""
    return next((value for name, value in least.items() if name.startswith(prefix)), None)


def reach(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """For an everyday scenario's `result` (its rounds, medians and targets): `least`, each
    target's bound with hookline's work beside the HTTP at its flat-out cost (module doc: the
    least cost ratios, the service's least cores, and for Huey the most its CPU per delivery
    could be over the service's), the median of each round's bound, as each check is the
    median of each round's ratio; and `out_of_reach`, whether that bound misses the target.
    A file whose rounds carry no floor figures is bounded from its medians. Targets whose
    figures are missing are left out of both."""
    targets = result.get("targets", {})
    per_round = [_bounds(view, targets, [huey]) for view, huey in _round_views(result)]
    if not any(per_round):
        huey = [r["huey"]["huey_cpu_s_per_1000_deliveries"] for r in result.get("rounds", [])
                if r.get("huey", {}).get("complete")]
        per_round = [_bounds(result["medians"], targets, huey)]
    least = _median_bounds(per_round)
    out = {name: _misses(name, value, targets) for name, value in least.items()}
    return {"least": least, "out_of_reach": out}


def _median_bounds(per_round: list[dict[str, float]]) -> dict[str, float]:
    """Each target's bound over the rounds that have one: their median, 3 decimals."""
    names = dict.fromkeys(name for bounds in per_round for name in bounds)
    return {name: round(statistics.median(b[name] for b in per_round if name in b), 3)
            for name in names}


def _misses(name: str, bound: float, targets: dict[str, Any]) -> bool:
    """Whether the target `name` is out of reach at `bound`: Huey's ratio (the most it could
    be) below its limit, the service's cores (the least) at or above its limit, a cost ratio
    (the least) above its limit."""
    if name.startswith("huey_"):
        return bound < float(targets.get("huey_cpu_ratio_at_least", 4.0))
    if name.startswith("service_"):
        return bound >= float(targets.get("service_cores_below", 0.3))
    return bound > float(targets.get("cost_ratio_at_most", 1.5))


def _round_views(result: dict[str, Any]) -> list[tuple[dict[str, Any], float | None]]:
    """Each round of `result` as its medians would read (the figures `_bounds` takes), with
    its Huey CPU per delivery (None unless complete)."""
    views = []
    for r in result.get("rounds", []):
        flat = r.get("flat_out")
        if not flat:
            continue
        steady = {}
        for rate, run in r.get("steady", {}).items():
            floor = run.get("floor") or {}
            steady[rate] = {
                **{f"floor_{side}_vs_{against}": (floor.get(f"vs_{against}") or {}).get(side)
                   for side in ("server", "client") for against in ("hookline_flat_out",
                                                                    "flat_out")},
                "floor_service_cores": floor.get("service_cores")}
        huey = r.get("huey", {})
        views.append(({"flat_out": flat, "steady": steady},
                      huey.get("huey_cpu_s_per_1000_deliveries") if huey.get("complete")
                      else None))
    return views


def _bounds(view: dict[str, Any], targets: dict[str, Any],
            huey_ms: list[float | None]) -> dict[str, float]:
    """The bounds (module doc) of one set of figures: a round's, or the medians. `huey_ms`:
    Huey's CPU per delivery (ms), its median taken; None entries ignored."""
    limit = float(targets.get("cost_ratio_at_most", 1.5))
    flat = view["flat_out"]
    bounds: dict[str, float] = {}
    for rate, figures in view["steady"].items():
        for key, (side, _) in SIDES.items():
            value = least_ratio(figures.get(f"floor_{side}_vs_hookline_flat_out"),
                                figures.get(f"floor_{side}_vs_flat_out"))
            if value is not None:
                bounds[f"{key}_at_{rate}_within_{limit}x_flat_out"] = value
    rate_per_s = float(targets.get("at_rate", 200.0))
    at_rate = view["steady"].get(f"{rate_per_s:g}", {})
    bare: dict[str, float] = {}  # ms per request at the rate: the server's, the client's
    books: dict[str, float] = {}  # ms per event (ingest), per delivery (workers), flat out
    for key, (side, flat_key) in SIDES.items():
        vs_hookline, vs_own = (at_rate.get(f"floor_{side}_vs_{against}")
                               for against in ("hookline_flat_out", "flat_out"))
        kept = bookkeeping_ms(flat.get(flat_key), vs_hookline, vs_own)
        if kept is None or vs_hookline is None:
            return bounds
        bare[key], books[key] = vs_hookline * flat[flat_key], kept
    one_event_ms = books["ingest_cpu"] + ENDPOINTS * books["workers_cpu"]
    if (cores := at_rate.get("floor_service_cores")) is not None:
        cores_limit = float(targets.get("service_cores_below", 0.3))
        bounds[f"service_below_{cores_limit}_cores"] = round(
            cores + rate_per_s * one_event_ms / 1000, 3)
    if huey := [ms for ms in huey_ms if ms is not None]:
        # The least CPU per delivery (ms): a third of an event's request and own work, and
        # a delivery's own.
        per_delivery = (bare["ingest_cpu"] + books["ingest_cpu"]) / ENDPOINTS \
            + bare["workers_cpu"] + books["workers_cpu"]
        huey_limit = float(targets.get("huey_cpu_ratio_at_least", 4.0))
        bounds[f"huey_cpu_per_delivery_at_least_{huey_limit:g}x"] = round(
            statistics.median(huey) / per_delivery, 3)  # CPU s per 1,000 = ms per delivery
    return bounds



def durable_reach(result: dict[str, Any]) -> dict[str, Any]:
    """For an everyday scenario's `result`: each target's bound measured on the least durable
    service (rehearsal/everyday_floor.py, durable_floor) at the rate, the median of the
    rounds' own (`least`); `contradicted`, the targets where hookline's own figure is on the
    target's side of that bound (the floor is then no floor there: its premise fails, and
    the target is not counted); `out_of_reach`, whether the bound misses the target
    where it is not contradicted; and `with_own_work`, the same three for the cost ratios
    with hookline's work beyond the floor added at its flat-out cost (:func:`with_own_work`:
    the premise of :func:`reach` on the floor's figures instead of the bare HTTP's).

    Per round: a cost target's least ratio is the floor's cost per item at the rate over
    hookline's flat-out cost (a design whose work at the rate costs at least the floor's and
    that is no slower flat out than hookline); the service's least cores are the floor's at
    the target rate; Huey's most ratio is Huey's CPU per delivery over the floor's at the
    target rate (its two processes' CPU per event over ENDPOINTS). Rounds without the
    floor's figures (a file from before it was measured) give none."""
    targets = result.get("targets", {})
    limit = float(targets.get("cost_ratio_at_most", 1.5))
    rate_key = f"{float(targets.get('at_rate', 200.0)):g}"
    cores_name = f"service_below_{targets.get('service_cores_below', 0.3)}_cores"
    huey_limit = float(targets.get("huey_cpu_ratio_at_least", 4.0))
    huey_name = f"huey_cpu_per_delivery_at_least_{huey_limit:g}x"
    per_round: list[dict[str, float]] = []
    per_round_with_work: list[dict[str, float]] = []
    for r in result.get("rounds", []):
        flat, bounds, with_work = r.get("flat_out") or {}, {}, {}
        floor_flat = flat.get("durable") or {}
        for rate, run in r.get("steady", {}).items():
            durable = run.get("durable") or {}
            for key, (floor_key, flat_key) in DURABLE_SIDES.items():
                name = f"{key}_at_{rate}_within_{limit}x_flat_out"
                if (bound := ratio(durable.get(floor_key), flat.get(flat_key))) is not None:
                    bounds[name] = bound
                if (plus := with_own_work(durable.get(floor_key), floor_flat.get(floor_key),
                                          flat.get(flat_key))) is not None:
                    with_work[name] = plus
        at_rate = r.get("steady", {}).get(rate_key, {}).get("durable") or {}
        if at_rate.get("cores") is not None:
            bounds[cores_name] = at_rate["cores"]
        huey, floor_ms = r.get("huey", {}), _floor_ms_per_delivery(at_rate)
        if huey.get("complete") and floor_ms:
            bounds[huey_name] = round(float(huey["huey_cpu_s_per_1000_deliveries"]) / floor_ms, 3)
        per_round.append(bounds)
        per_round_with_work.append(with_work)
    measured = _hookline_figures(result.get("medians", {}), limit, rate_key, cores_name,
                                 huey_name)
    least, own_work = (_verdicts(_median_bounds(rounds), measured, huey_name, targets)
                       for rounds in (per_round, per_round_with_work))
    return {**least, "with_own_work": own_work}


def with_own_work(floor_at_rate: float | None, floor_flat: float | None,
                  hookline_flat: float | None) -> float | None:
    """The least steady / flat-out cost ratio (3 decimals) of a design no slower flat out
    than hookline whose cost above the least durable service's flat-out cost costs it at
    least as much per item at the rate as flat out: (F + H - Ff) / H, with F the floor's
    cost at the rate, Ff its flat-out cost and H hookline's flat-out cost (ms per item).
    None when a figure is missing or zero, or when hookline is cheaper flat out than the
    floor (H < Ff: the floor is no floor there)."""
    if not floor_at_rate or not floor_flat or not hookline_flat or hookline_flat < floor_flat:
        return None
    return ratio(floor_at_rate + hookline_flat - floor_flat, hookline_flat)


def _verdicts(least: dict[str, float], measured: dict[str, float | None], huey_name: str,
              targets: dict[str, Any]) -> dict[str, Any]:
    """`least` (each target's bound) with `contradicted`, the targets where hookline's own
    figure in `measured` is on the target's side of its bound, and `out_of_reach`, whether
    the bound misses the target where it is not contradicted."""
    contradicted = sorted(name for name, bound in least.items()
                          if (own := measured.get(name)) is not None
                          and (own > bound if name == huey_name else own < bound))
    return {"least": least, "contradicted": contradicted,
            "out_of_reach": {name: name not in contradicted and _misses(name, value, targets)
                             for name, value in least.items()}}


def _hookline_figures(medians: dict[str, Any], limit: float, rate_key: str, cores_name: str,
                      huey_name: str) -> dict[str, float | None]:
    """hookline's own median figure for each target durable_reach bounds."""
    figures: dict[str, float | None] = {
        f"{key}_at_{rate}_within_{limit}x_flat_out": steady.get(f"{key}_vs_flat_out")
        for rate, steady in medians.get("steady", {}).items() for key in DURABLE_SIDES}
    figures[cores_name] = medians.get("steady", {}).get(rate_key, {}).get("service_cores")
    figures[huey_name] = medians.get("huey_cpu_ratio")
    return figures


def _floor_ms_per_delivery(durable: dict[str, Any]) -> float | None:
    """The least durable service's CPU per delivery (ms): an event's ingest over ENDPOINTS
    plus a delivery's; None when a figure is missing."""
    ingest, deliverer = (durable.get(key) for key in ("ingest_cpu_ms_per_event",
                                                       "deliverer_cpu_ms_per_delivery"))
    if ingest is None or deliverer is None:
        return None
    return float(ingest) / ENDPOINTS + float(deliverer)
