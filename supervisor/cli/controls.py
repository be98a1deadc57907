"""Operator commands: `hookline destinations show|update|remove`, `pause`, `resume`, `dead`,
`replay`, `purge`, `job`. They talk to the store directly, so they work with the service
stopped; a running worker picks replayed or resumed jobs up through the store's wake-up.

Every command prints a human table by default and JSON with `--json`; exit codes are 0 ok,
1 failed (not found, conflict, store error), 2 usage (bad flags, or a value the rule book in
shared/policy/rules.py refuses, with the same message the admin API gives).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from hookline.shared.catalogue import check_subscriptions
from hookline.shared.config import Config
from hookline.shared.endpoint_models import Destination
from hookline.shared.errors import ConfigError, NotFound
from hookline.shared.logs import get_logger
from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.operator_models import scope_tenant
from hookline.shared.policy import inputs, rules
from hookline.shared.policy.rules import (
    DEFAULT_BODIES_AGE,
    DEFAULT_DEDUPE_AGE,
    DEFAULT_METADATA_AGE,
    DESTINATION_UPDATERS,
)
from hookline.shared.record_models import DeadLetter, PurgeResult
from hookline.shared.store import Store, resolve_instants
from hookline.shared.timeparse import parse_instant_spec
from hookline.shared.views import (
    dead_letter_view,
    destination_removed_view,
    destination_view,
    job_story_view,
    paused_view,
    purge_result_view,
    replay_result_view,
    resumed_view,
)
from hookline.supervisor.cli.common import (
    add_page_flags,
    async_command,
    fail,
    id_number,
    operator,
    print_json,
    print_more_hint,
    print_record,
    print_table,
    vet_url,
    with_store,
)
from hookline.supervisor.cli.destination_checks import add_filter_flags, filter_option
from hookline.supervisor.cli.event_types import warn_about
from hookline.supervisor.cli.human import show
from hookline.supervisor.cli.tenants import (
    add_tenant_flag,
    destination_tenant,
    existing_tenant,
    listing_scope,
    named,
    tenant_arg,
)


def add_destination_actions(dest: Any) -> None:
    """Add `show`, `update`, `remove` to the `hookline destinations` group."""
    from hookline.supervisor.cli.destinations import add_policy_flags  # noqa: PLC0415  (no cycle)

    show = dest.add_parser("show", help="one destination's settings (secret redacted)")
    show.add_argument("name")
    add_tenant_flag(show)
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=async_command(destinations_show))

    upd = dest.add_parser("update", help="change a destination's settings")
    upd.add_argument("name")
    upd.add_argument("--url")
    upd.add_argument("--event-type", action="append",
                     help="replace the subscriptions (repeatable: type, `prefix.*` or `*`)")
    upd.add_argument("--max-in-flight", type=int)
    add_policy_flags(upd, changing=True)
    add_filter_flags(upd, changing=True)
    upd.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                     help="any changeable field (" + ", ".join(sorted(DESTINATION_UPDATERS))
                          + "); VALUE is parsed as JSON when it is valid JSON")
    add_tenant_flag(upd)
    upd.add_argument("--json", action="store_true")
    upd.set_defaults(handler=async_command(destinations_update))

    rm = dest.add_parser("remove", help="remove a destination (its unfinished jobs end dead)")
    rm.add_argument("name")
    add_tenant_flag(rm)
    rm.add_argument("--json", action="store_true")
    rm.set_defaults(handler=async_command(destinations_remove))


DEFAULT_DEAD_LIMIT = 100
"""Dead letters `hookline dead` lists when no --limit is given."""


def register(sub: Any) -> None:
    """Add pause, resume, dead, replay, purge and job to the CLI."""
    pause = sub.add_parser("pause", help="stop all requests to a destination; jobs wait")
    pause.add_argument("name")
    pause.add_argument("--reason", default="paused by operator")
    add_tenant_flag(pause)
    pause.add_argument("--json", action="store_true")
    pause.set_defaults(handler=async_command(pause_cmd))

    resume = sub.add_parser("resume", help="let a paused destination's jobs flow again")
    resume.add_argument("name")
    add_tenant_flag(resume)
    resume.add_argument("--json", action="store_true")
    resume.set_defaults(handler=async_command(resume_cmd))

    dead = sub.add_parser("dead", help="list dead jobs with their last error")
    dead.add_argument("--destination")
    add_tenant_flag(dead, "only this tenant's destinations; --destination names one of its "
                          "destinations (default: the default tenant's)")
    dead.add_argument("--since", help="died at or after TIME (ISO 8601, unix s, or 2h)")
    add_page_flags(dead, what="dead letters", default=DEFAULT_DEAD_LIMIT,
                   before_help="the next page: the dead letters after job ID in this order "
                               "(the ID the hint gives: the last one listed)")
    dead.add_argument("--json", action="store_true")
    dead.set_defaults(handler=async_command(dead_cmd))

    replay = sub.add_parser("replay", help="give dead jobs a fresh attempt budget")
    which = replay.add_mutually_exclusive_group(required=True)
    which.add_argument("--job", type=id_number, help="one job by id")
    which.add_argument("--all-dead", action="store_true", help="every dead job (filtered)")
    replay.add_argument("--destination")
    add_tenant_flag(replay, "only this tenant's destinations; --destination names one of "
                            "its destinations (default: the default tenant's)")
    replay.add_argument("--since", help="died at or after TIME (ISO 8601, unix s, or 2h)")
    replay.add_argument("--dry-run", action="store_true", help="only count")
    replay.add_argument("--json", action="store_true")
    replay.set_defaults(handler=async_command(replay_cmd))

    purge = sub.add_parser("purge", help="retention: drop old bodies, then old metadata")
    purge.add_argument("--bodies-older-than", default=DEFAULT_BODIES_AGE,
                       help=f"empty terminal events' bodies after AGE (default "
                            f"{DEFAULT_BODIES_AGE})")
    purge.add_argument("--metadata-older-than", default=DEFAULT_METADATA_AGE,
                       help=f"delete terminal jobs and attempts after AGE (default "
                            f"{DEFAULT_METADATA_AGE})")
    purge.add_argument("--dedupe-keep", default=DEFAULT_DEDUPE_AGE,
                       help=f"keep events' idempotency keys this long (default "
                            f"{DEFAULT_DEDUPE_AGE})")
    purge.add_argument("--json", action="store_true")
    purge.set_defaults(handler=async_command(purge_cmd))

    job = sub.add_parser("job", help="the story of one job: event, attempts, errors")
    job.add_argument("id", type=id_number)
    job.add_argument("--json", action="store_true")
    job.set_defaults(handler=async_command(job_cmd))


# -- destinations --------------------------------------------------------------------------


async def destinations_show(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations show NAME`: settings with the secret redacted."""
    tenant = tenant_arg(args)

    async def one(store: Store) -> Destination:
        return await store.get_destination(
            args.name, tenant=await destination_tenant(store, args.name, tenant))

    view = destination_view(await with_store(config, one))
    if args.json:
        print_json(view)
    else:  # header values are never shown, so list only their names
        print_record({**view, "headers": list(view["headers"])})
    return 0


def parse_set_options(pairs: list[str]) -> dict[str, Any]:
    """`FIELD=VALUE` pairs -> dict; VALUE is JSON when it parses, else the raw string.

    Raises:
        ConfigError: a pair without `=`.
    """
    changes: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set needs FIELD=VALUE, not {pair!r}")
        try:
            changes[key.strip()] = json.loads(raw)
        except ValueError:
            changes[key.strip()] = raw
    return changes


async def destinations_update(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations update NAME --url ... --event-type ... --max-in-flight ...
    --timeout ... --rate-limit ... --[no-]ordered --filter JSON --set FIELD=VALUE`."""
    from hookline.supervisor.cli.destinations import policy_options  # noqa: PLC0415  (no cycle)

    changes = parse_set_options(args.set)
    given, value = filter_option(args)
    if given:
        changes["filter"] = value
    for key, value in (("url", args.url), ("event_types", args.event_type),
                       ("max_in_flight", args.max_in_flight), *policy_options(args).items()):
        if value is not None:
            changes[key] = value
    rules.destination_changes(changes)  # usage errors exit 2 before the store opens
    if "url" in changes:
        await vet_url(changes["url"], config)  # blocked: exit 2
    tenant = tenant_arg(args)

    async def update(store: Store) -> Destination:
        owner = await destination_tenant(store, args.name, tenant)
        if "event_types" in changes:  # SubscriptionRefused: exit 2
            before = await store.get_destination(args.name, tenant=owner)
            warn_about(check_subscriptions(await store.list_event_types(),
                                           rules.event_types(changes["event_types"]),
                                           already=before.event_types))
        return await store.update_destination(args.name, tenant=owner, **changes)

    dest = await with_store(config, update)
    get_logger().info("destination_updated", destination=dest.name, tenant=dest.tenant,
                      fields=sorted(changes))
    if args.json:
        print_json(destination_view(dest))
    else:
        print(f"updated {dest.name}: " + ", ".join(sorted(changes)))
    return 0


async def destinations_remove(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations remove NAME`: soft delete; unfinished jobs end dead."""
    tenant = tenant_arg(args)

    async def remove(store: Store) -> int:
        return await store.remove_destination(
            args.name, tenant=await destination_tenant(store, args.name, tenant))

    ended = await with_store(config, remove)
    get_logger().info("destination_removed", destination=args.name,
                      tenant=tenant or DEFAULT_TENANT, jobs_ended=ended)
    if args.json:
        print_json(destination_removed_view(args.name, ended))
    else:
        print(f"removed {named(args.name, tenant)}; {ended} unfinished job(s) marked dead")
    return 0


# -- pause / resume ------------------------------------------------------------------------


async def pause_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline pause NAME [--reason TEXT]`."""
    await _set_paused(config, args, True)
    get_logger().info("destination_paused", destination=args.name,
                      tenant=tenant_arg(args) or DEFAULT_TENANT, reason=args.reason,
                      **operator())
    if args.json:
        print_json(paused_view(args.name, args.reason))
    else:
        print(f"paused {named(args.name, tenant_arg(args))} ({args.reason})")
    return 0


async def resume_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline resume NAME`: its waiting jobs become claimable, its retries waiting for a
    later attempt due now; workers are woken."""
    brought_forward = await _set_paused(config, args, False)
    get_logger().info("destination_resumed", destination=args.name,
                      tenant=tenant_arg(args) or DEFAULT_TENANT,
                      jobs_brought_forward=brought_forward, **operator())
    if args.json:
        print_json(resumed_view(args.name, brought_forward))
    else:
        print(f"resumed {named(args.name, tenant_arg(args))}; brought forward "
              f"{brought_forward} job(s) waiting for a retry")
    return 0


async def _set_paused(config: Config, args: argparse.Namespace, paused: bool) -> int:
    """Pause or resume the destination `args` name; how many jobs a resume brought forward."""
    tenant = tenant_arg(args)

    async def flip(store: Store) -> int:
        return await store.set_paused(args.name, paused, args.reason if paused else None,
                                      tenant=await destination_tenant(store, args.name, tenant))

    return await with_store(config, flip)


# -- dead letters and replay ---------------------------------------------------------------


async def dead_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline dead [--destination NAME] [--since TIME] [--limit N] [--before ID]`: most
    recently dead first, each with whether it can be replayed (`no: body purged`, `no:
    destination removed`); stderr names the next page when more exist."""
    since = None if args.since is None else parse_instant_spec(args.since)
    tenant = tenant_arg(args)
    limit = inputs.list_limit(args.limit, DEFAULT_DEAD_LIMIT)

    async def list_dead(store: Store) -> list[DeadLetter]:
        since_s, = await resolve_instants(store, since)  # `10m`: on the store's clock
        await listing_scope(store, args.destination, tenant)
        # One more than shown: the hint appears only when another page really exists.
        return await store.list_dead(destination=args.destination, since_s=since_s,
                                     limit=limit + 1, tenant=tenant, before_id=args.before)

    found = await with_store(config, list_dead)
    rows = [dead_letter_view(j) for j in found[:limit]]
    if args.json:
        print_json(rows)
    else:
        print_table([{**row, "died_at": row["finished_at"],
                      "replayable": "yes" if row["replayable"]
                      else f"no: {row['not_replayable_reason']}"} for row in rows],
                    # The tenant with the destination: names repeat across tenants.
                    ["id", "message_id", "event_type", "tenant", "destination", "attempts",
                     "died_at", "replayable", "last_error"])
    if len(found) > limit:
        print_more_hint(limit, rows[-1]["id"])
    return 0


async def replay_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline replay --job ID | --all-dead [--destination] [--since] [--dry-run]`."""
    since = None if args.since is None else parse_instant_spec(args.since)
    tenant = tenant_arg(args)
    if args.job is not None and (args.destination or since is not None or tenant):
        return fail("--destination, --tenant and --since filter --all-dead, not --job", 2)

    async def replay(store: Store) -> tuple[float | None, int]:
        since_s, = await resolve_instants(store, since)  # `10m`: on the store's clock
        if args.destination is not None:  # NotFound (a live one): a one-line error, exit 1
            await store.get_destination(args.destination, tenant=await destination_tenant(
                store, args.destination, tenant))
        elif tenant is not None:
            await existing_tenant(store, tenant)
        return since_s, await store.replay(job_id=args.job, all_dead=args.all_dead,
                                           destination=args.destination, since_s=since_s,
                                           dry_run=args.dry_run, tenant=tenant)

    since_s, count = await with_store(config, replay)
    if not args.dry_run:
        get_logger().info("jobs_replayed", count=count, job_id=args.job,
                          destination=args.destination,
                          tenant=scope_tenant(args.destination, tenant), since_s=since_s,
                          **operator())
    if args.json:
        print_json(replay_result_view(count, args.dry_run))
    else:
        print(f"would replay {count} job(s)" if args.dry_run else f"replayed {count} job(s)")
    return 0


# -- retention -----------------------------------------------------------------------------


async def purge_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline purge`: see OPERATIONS.md, "Purge and retention"."""
    ages = rules.retention_ages(args.bodies_older_than, args.metadata_older_than,
                                args.dedupe_keep)

    async def purge(store: Store) -> PurgeResult:
        # Ages count back from the store's time, which the rows were written with.
        return await store.purge(**ages.cutoffs(await store.now_s()))

    result = await with_store(config, purge)
    out = purge_result_view(result)
    get_logger().info("purged", **out)
    if args.json:
        print_json(out)
    else:
        print(f"purged {result.bodies} bodies, {result.jobs} jobs, {result.attempts} attempts, "
              f"{result.events} events; forgot {result.previous_secrets} previous secrets "
              "past their overlap")
    return 0


# -- one job -------------------------------------------------------------------------------


async def job_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline job ID`: the job, its event, and each attempt; with --json the admin API's
    `GET /v1/admin/jobs/{id}` answer."""
    try:
        view = job_story_view(await with_store(config, lambda s: s.get_job(args.id)))
    except NotFound as exc:  # job and event numbers are two series: say where the other is
        raise NotFound(f"{exc} (job and event numbers differ: `hookline event {args.id}` "
                       f"shows event {args.id} and its jobs)") from exc
    if args.json:
        print_json(view)
        return 0
    purged = view["body_purged_at"]
    print_record({
        "job": view["id"],
        "status": view["status"],
        "destination": view["destination"],
        "tenant": view["tenant"],  # names repeat across tenants
        "event_type": view["event_type"],
        "message_id": view["message_id"],
        "source": f"{view['source']}, id {view['source_event_id']}",
        "received_at": view["received_at"],
        "body": f"purged {show('purged_at', purged)}" if purged is not None
        else show("body_bytes", view["body_bytes"]),
        "attempts": f"{view['attempts_in_budget']} in the current budget, "
                    f"replayed {view['replays']} time(s)",
        "next_run_at": view["run_at"] if view["status"] == "pending" else None,
        "finished_at": view["finished_at"],
        "last_error": view["last_error"],
    })
    print()
    rows = [{**a, "result": a["status_code"] if a["status_code"] is not None
             else (a["error"] or "in flight")} for a in view["attempts"]]
    print_table(rows, ["attempt", "started_at", "duration_s", "worker", "result",
                       "response_excerpt"])
    return 0
