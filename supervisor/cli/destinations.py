"""`hookline destinations add|list` (and, from their modules, show|update|remove, the
secret commands, filter-test and test), `hookline jobs`, `hookline stats`: read and change the
store directly, so they work whether or not the service runs."""

from __future__ import annotations

import argparse
from typing import Any

from hookline.shared.catalogue import check_subscriptions
from hookline.shared.config import Config
from hookline.shared.endpoint_models import Destination
from hookline.shared.errors import ConfigError, InvalidSetting
from hookline.shared.models import DEFAULT_TENANT, JOB_STATUSES
from hookline.shared.policy import inputs, rules
from hookline.shared.record_models import Job
from hookline.shared.report_models import Stats
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.shared.timeparse import parse_duration
from hookline.shared.views import destination_view, job_view, stats_view
from hookline.supervisor.cli.common import (
    add_named,
    add_page_flags,
    print_json,
    print_more_hint,
    print_record,
    print_table,
    run_command,
    vet_url,
    with_store,
)
from hookline.supervisor.cli.destination_checks import (
    add_check_actions,
    add_filter_flags,
    filter_option,
)
from hookline.supervisor.cli.event_types import warn_about
from hookline.supervisor.cli.human import show
from hookline.supervisor.cli.tenants import (
    add_tenant_flag,
    existing_tenant,
    listing_scope,
    tenant_arg,
)

DEFAULT_JOBS_LIMIT = 50
"""Jobs `hookline jobs` lists when no --limit is given."""


def register(sub: Any) -> None:
    """Add the destination, job and stats commands to the CLI."""
    dest = sub.group("destinations", help="manage destinations (endpoints)")
    add = dest.add_parser("add", help="register a destination")
    add.add_argument("name")
    add.add_argument("url")
    add.add_argument("--secret", help="whsec_ secret; generated and printed once if omitted")
    add.add_argument("--event-type", action="append",
                     help="subscribe to a type, `prefix.*` or `*` (repeatable; default `*`)")
    add.add_argument("--max-in-flight", type=int, default=rules.DEFAULT_MAX_IN_FLIGHT,
                     help="most concurrent requests to it across all workers (default "
                          f"{rules.DEFAULT_MAX_IN_FLIGHT})")
    add.add_argument("--header", action="append", metavar="'NAME: VALUE'",
                     help="a custom request header sent with every attempt (repeatable)")
    add_policy_flags(add)
    add_filter_flags(add)
    add_tenant_flag(add)
    add.add_argument("--json", action="store_true")
    add.set_defaults(handler=lambda c, a: run_command(lambda: destinations_add(c, a)))
    lst = dest.add_parser("list", help="list destinations (secrets hidden)")
    add_tenant_flag(lst, "only this tenant's destinations (default: every tenant's)")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(handler=lambda c, a: run_command(lambda: destinations_list(c, a)))
    from hookline.supervisor.cli.controls import add_destination_actions  # noqa: PLC0415  (controls imports this module back)
    from hookline.supervisor.cli.destination_secrets import add_secret_actions  # noqa: PLC0415  (destination_secrets imports this module back)

    add_destination_actions(dest)  # show, update, remove
    add_secret_actions(dest)  # rotate-secret, secret, expire-previous-secret
    add_check_actions(dest)  # filter-test, test

    jobs_p = sub.add_parser("jobs", help="list jobs, newest first")
    jobs_p.add_argument("--status", choices=JOB_STATUSES)
    add_page_flags(jobs_p, what="jobs", default=DEFAULT_JOBS_LIMIT,
                   before_help="the next page: only jobs with an id below ID (the hint's: the "
                               "last one listed)")
    add_tenant_flag(jobs_p, "only jobs of this tenant's destinations (default: every tenant's; "
                            "with --destination: the default tenant's)")
    jobs_p.add_argument("--destination", metavar="NAME",
                        help="only this destination's jobs (a removed one by the name it "
                             "keeps, NAME~removed-ID)")
    jobs_p.add_argument("--json", action="store_true")
    jobs_p.set_defaults(handler=lambda c, a: run_command(lambda: jobs(c, a)))

    stats_p = sub.add_parser("stats", help="counts by status, events, attempts")
    add_tenant_flag(stats_p, "whose destinations the per-destination counts and the paused "
                             "list show (default: the default tenant's; every other figure "
                             "is the whole service's)")
    stats_p.add_argument("--json", action="store_true")
    stats_p.set_defaults(handler=lambda c, a: run_command(lambda: stats(c, a)))


def add_policy_flags(parser: Any, *, changing: bool = False) -> None:
    """`--timeout`, `--rate-limit`, `--ordered` and `--propagate-trace` (plus `--no-ordered`
    and `--no-propagate-trace` when `changing` an existing destination): the delivery policy
    fields of the rule book."""
    parser.add_argument("--timeout", metavar="DURATION",
                        help="attempt timeout for this destination, e.g. 5s or 2.5 (default: "
                             "the service's attempt_timeout_s)")
    parser.add_argument("--rate-limit", type=float, metavar="PER_SECOND",
                        help="most requests per second to it across all workers (default: "
                             "no limit)")
    if changing:
        parser.add_argument("--ordered", action=argparse.BooleanOptionalAction,
                            help="send its jobs one at a time, oldest first (or not)")
    else:
        parser.add_argument("--ordered", action="store_true",
                            help="send its jobs one at a time, oldest first")
    trace_help = ("send each attempt's trace context (a traceparent header) so the receiver "
                  "continues the trace, while tracing is on")
    if changing:
        parser.add_argument("--propagate-trace", action=argparse.BooleanOptionalAction,
                            help=trace_help + " (or not)")
    else:
        parser.add_argument("--propagate-trace", action="store_true",
                            help=trace_help)


def policy_options(args: argparse.Namespace) -> dict[str, Any]:
    """The policy flags given (see add_policy_flags) as rule-book fields; `--timeout` is a
    duration. Raises InvalidSetting("timeout_s") for a malformed one."""
    out: dict[str, Any] = {}
    if args.timeout is not None:
        try:
            out["timeout_s"] = parse_duration(args.timeout)
        except ConfigError as exc:
            raise InvalidSetting("timeout_s", str(exc)) from None
    if args.rate_limit is not None:
        out["rate_limit_per_s"] = args.rate_limit
    if args.ordered is not None:
        out["ordered"] = args.ordered
    if args.propagate_trace is not None:
        out["propagate_trace"] = args.propagate_trace
    return out


def parse_header_options(values: list[str]) -> dict[str, str]:
    """`--header 'Name: value'` options -> {name: value} (whitespace around both stripped).

    Raises:
        ConfigError: an option without `:`.
    """
    headers: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition(":")
        if not sep:
            raise ConfigError(f"--header needs 'NAME: VALUE', not {value!r}")
        headers[name.strip()] = text.strip()
    return headers


async def destinations_add(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations add NAME URL`: prints the secret once when it was generated.
    An invalid field exits 2 (the rule book's message) before the store opens, and so does a
    blocked address; a taken name exits 1."""
    tenant = tenant_arg(args)  # first: NAME may be a label, TENANT~NAME
    secret = args.secret or generate_secret()
    new = rules.new_destination(
        name=args.name, url=args.url, secret=secret,
        event_types=args.event_type or list(rules.DEFAULT_EVENT_TYPES),
        max_in_flight=args.max_in_flight, headers=parse_header_options(args.header or []),
        filter=filter_option(args)[1], **policy_options(args))
    await vet_url(new.url, config)  # blocked: exit 2

    async def add(store: Store) -> Destination:
        # A subscription no catalogue type matches: SubscriptionRefused, exit 2.
        warn_about(check_subscriptions(await store.list_event_types(), new.event_types))
        return await add_named(store.add_destination(
            name=new.name, url=new.url, secret=new.secret, event_types=new.event_types,
            max_in_flight=new.max_in_flight, headers=new.headers, timeout_s=new.timeout_s,
            rate_limit_per_s=new.rate_limit_per_s, ordered=new.ordered, filter=new.filter,
            propagate_trace=new.propagate_trace, tenant=await existing_tenant(store, tenant)))

    dest = await with_store(config, add)
    if args.json:  # a generated secret is shown once, as the admin API does
        print_json(destination_view(dest, generated_secret=None if args.secret else secret))
    else:
        print(f"added destination {dest.name} -> {show('url', dest.url)}"
              + (f" (tenant {dest.tenant})" if tenant is not None else ""))
        if not args.secret:
            print(f"signing secret (shown once): {secret}")
    return 0


async def destinations_list(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations list [--tenant ID]`: secrets are never shown; every tenant's
    destinations unless --tenant names one."""
    tenant = tenant_arg(args)

    async def listed(store: Store) -> list[Destination]:
        if tenant is not None:
            await existing_tenant(store, tenant)
        return await store.list_destinations(tenant)

    rows = [destination_view(d) for d in await with_store(config, listed)]
    if args.json:
        print_json(rows)
        return 0
    print_table(rows, ["tenant", "name", "url", "event_types", "max_in_flight", "paused",
                       "failure_streak", "created_at"])
    return 0


async def jobs(config: Config, args: argparse.Namespace) -> int:
    """`hookline jobs [--status S] [--tenant ID] [--destination NAME] [--limit N] [--before
    ID]`: newest first; stderr names the next page when more exist. A destination the
    tenant has none of is exit 1 naming who has one, not an empty list."""
    tenant = tenant_arg(args)
    limit = inputs.list_limit(args.limit, DEFAULT_JOBS_LIMIT)

    async def listed(store: Store) -> list[Job]:
        # One more than shown: the hint appears only when another page really exists.
        scope = await listing_scope(store, args.destination, tenant)
        if args.destination is not None:
            return await store.list_tenant_jobs(scope or DEFAULT_TENANT,
                                                destination=args.destination,
                                                status=args.status, limit=limit + 1,
                                                before_id=args.before)
        return await store.list_jobs(status=args.status, limit=limit + 1, tenant=tenant,
                                     before_id=args.before)

    found = await with_store(config, listed)
    rows = [job_view(j) for j in found[:limit]]
    if args.json:
        print_json(rows)
    else:
        print_table(rows, ["id", "message_id", "event_type", "tenant", "destination",
                           "status", "attempts", "created_at", "last_error"])
    if len(found) > limit:
        print_more_hint(limit, rows[-1]["id"])
    return 0


async def stats(config: Config, args: argparse.Namespace) -> int:
    """`hookline stats [--tenant ID]`: counts by status, events, attempts, oldest pending
    age, and one tenant's destinations' counts; with --json the admin API's
    `GET /v1/admin/stats` answer."""
    wanted = tenant_arg(args)  # checked before the store opens (exit 2)

    async def figures(store: Store) -> tuple[Stats, int | None, bool]:
        tenant = await existing_tenant(store, wanted)
        others = wanted is None and any(t.id != DEFAULT_TENANT
                                        for t in await store.list_tenants(limit=2))
        return await store.stats(tenant), (await store.health()).wal_bytes, others

    found, wal_bytes, other_tenants = await with_store(config, figures)
    view = stats_view(found, wal_bytes)
    if args.json:
        print_json(view)
        return 0
    print_record({
        "events": view["events"], "attempts": view["attempts"],
        "destinations_of_tenant": view["tenant"],
        "jobs_by_status": view["jobs_by_status"],
        "oldest_pending_age_s": view["oldest_pending_age_s"],
        "attempts_by_outcome": view["attempts_by_outcome"],
        "paused_destinations": [f"{name} ({reason or 'no reason given'})" for name, reason
                                in view["paused_destinations"].items()],
        "paused_in_every_tenant": view["paused_count"],
        "delivery_latency": _latency_summary(view["delivery_latency"]),
        "wal_bytes": view["wal_bytes"],
    })
    per_destination = view["jobs_by_destination"]
    if per_destination:
        statuses = sorted({s for counts in per_destination.values() for s in counts})
        print()
        print_table([{"destination": name, **counts} for name, counts
                     in sorted(per_destination.items())], ["destination", *statuses])
    if other_tenants:
        # The operator at 3 a.m. reads this first: say that a failing tenant is elsewhere.
        print(f"\nthe destinations above are the default tenant's; other tenants have "
              f"{view['paused_count'] - len(view['paused_destinations'])} paused: "
              "`hookline destinations list` shows every tenant's with its failure streak, "
              "`hookline stats --tenant ID` one tenant's counts")
    return 0


def _latency_summary(latency: dict[str, Any] | None) -> str | None:
    """`N delivered, mean X` from the stats' delivery latency histogram (None when empty)."""
    if not latency or not latency["count"]:
        return None
    mean = show("mean_s", latency["sum_s"] / latency["count"])
    return f"{latency['count']} delivered, mean {mean} from event to delivery"
