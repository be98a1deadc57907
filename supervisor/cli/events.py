"""Finding events and sending their jobs again: `hookline event REF`, `hookline events`,
`hookline resend`, `hookline retry-now`.

They talk to the store directly, so they work with the service stopped; a running worker
picks resent or hurried jobs up through the store's wake-up. `--json` prints the admin API's
shape for the same thing (shared/views.py). Exit codes: 0 ok, 1 not found or refused (a
pending job resent, a purged body), 2 usage. Every resend and retry now that is not a dry
run logs an audit line (`jobs_resent`, `jobs_retried_now`) on stderr with the OS user, the
`--reason`, the filters and the count.
"""

from __future__ import annotations

import argparse
from typing import Any

from hookline.shared.config import Config
from hookline.shared.models import JOB_STATUSES
from hookline.shared.operator_models import (
    BULK_DEFAULT_LIMIT,
    RESEND_STATUSES,
    BulkResult,
    EventFilter,
    EventMatch,
    EventRecord,
    JobSelection,
    audit,
)
from hookline.shared.store import Store, resolve_instants
from hookline.shared.timeparse import InstantSpec, parse_instant_spec
from hookline.shared.views import bulk_result_view, event_lookup_view, event_view, events_page_view
from hookline.supervisor.cli.common import (
    async_command,
    fail,
    id_number,
    operator,
    print_json,
    print_table,
    with_store,
)
from hookline.supervisor.cli.human import iso_time
from hookline.supervisor.cli.tenants import (
    add_tenant_flag,
    destination_tenant,
    listed_tenant,
    listing_scope,
    tenant_arg,
)

TIME_HELP = "ISO 8601, unix seconds, or an age like 2h"


def register(sub: Any) -> None:
    """Add event, events, resend and retry-now to the CLI."""
    event = sub.add_parser("event", help="one event and its jobs, by internal id, webhook-id "
                                         "(msg_...) or the sender's id")
    event.add_argument("ref", metavar="REF", help="internal id, msg_ id, or the sender's id")
    event.add_argument("--source", help="REF is the sender's id in this source (default: "
                                        "tried after the other forms, in source api)")
    add_tenant_flag(event, "the sender's id is looked up in this tenant's events (default: "
                           "the default tenant's, else the one tenant's that has it)")
    event.add_argument("--json", action="store_true")
    event.set_defaults(handler=async_command(event_cmd))

    events = sub.add_parser("events", help="events newest first, with their jobs' states")
    events.add_argument("--destination", help="events with a job for this destination")
    add_tenant_flag(events, "only this tenant's events; --destination names one of its "
                            "destinations (default: the default tenant's)")
    events.add_argument("--status", choices=JOB_STATUSES,
                        help="events with a job in this status")
    events.add_argument("--type", help="events of exactly this type")
    events.add_argument("--since", help=f"received at or after TIME ({TIME_HELP})")
    events.add_argument("--until", help=f"received before TIME ({TIME_HELP})")
    events.add_argument("--limit", type=int, default=100)
    events.add_argument("--before", type=id_number, metavar="ID", help="only ids below ID (paging)")
    events.add_argument("--json", action="store_true")
    events.set_defaults(handler=async_command(events_cmd))

    resend = sub.add_parser("resend", help="send done or dead jobs again: same webhook-id "
                                           "and body, fresh attempt budget")
    _selection_flags(resend, statuses=True)
    resend.set_defaults(handler=async_command(resend_cmd))

    retry = sub.add_parser("retry-now", help="bring pending jobs' next attempt forward to now")
    _selection_flags(retry, statuses=False)
    retry.set_defaults(handler=async_command(retry_now_cmd))


def _selection_flags(parser: argparse.ArgumentParser, *, statuses: bool) -> None:
    parser.add_argument("job_id", nargs="?", type=id_number, metavar="JOB_ID", help="one job")
    parser.add_argument("--destination", help="every matching job of this destination")
    add_tenant_flag(parser, "whose destination --destination names (default: the default "
                            "tenant's)")
    if statuses:
        parser.add_argument("--status", choices=RESEND_STATUSES,
                            help="only jobs in this status (default both)")
    parser.add_argument("--since", help=f"jobs created at or after TIME ({TIME_HELP})")
    parser.add_argument("--until", help=f"jobs created before TIME ({TIME_HELP})")
    parser.add_argument("--limit", type=int, default=BULK_DEFAULT_LIMIT,
                        help=f"most jobs taken, oldest first (default {BULK_DEFAULT_LIMIT})")
    parser.add_argument("--dry-run", action="store_true",
                        help="only count and list the first job ids; change nothing")
    parser.add_argument("--reason", help="why, for the audit log line")
    parser.add_argument("--json", action="store_true")


# -- lookup --------------------------------------------------------------------------------


async def event_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline event REF [--source S]`: the event's facts and its jobs."""
    tenant = tenant_arg(args)

    async def find(store: Store) -> EventMatch:
        # Without --tenant an internal id or a msg_ webhook-id is any tenant's (they are
        # global, as GET /v1/admin/events/{ref} has it); a sender's id, which repeats across
        # tenants, means the default tenant's, else the one tenant's that has it
        # (Store.find_event).
        if tenant is not None:  # a deleted one's kept events too (read-only)
            await listed_tenant(store, tenant)
        return await store.find_event(args.ref, args.source, tenant=tenant)

    match = await with_store(config, find)
    if args.json:
        print_json(event_lookup_view(match))
        return 0
    event = match.event
    print(f"event {event.id}: {event.type} {event.message_id} (matched by "
          f"{_MATCHED[match.matched_by]})")
    print(f"  tenant       {event.tenant}")  # whose destinations its jobs' names are
    print(f"  source       {event.source}, sender's id {event.source_event_id}")
    print(f"  received     {iso_time(event.received_at)}")
    body = (f"purged {iso_time(event.body_purged_at)} (its jobs cannot be resent)"
            if event.body_purged_at is not None else f"{event.body_bytes} bytes, stored")
    print(f"  body         {body}")
    if event.schema_problem:
        print(f"  schema       does not match its catalogue schema: {event.schema_problem}")
    print_table(event_view(event)["jobs"],
                ["id", "destination", "status", "attempts", "next_run_at", "last_error"])
    return 0


_MATCHED = {"id": "internal id", "message_id": "webhook-id",
            "source_event_id": "sender's id"}


async def events_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline events [filters]`: a page of events, newest first."""
    since, until = _instant_spec(args.since), _instant_spec(args.until)
    tenant = tenant_arg(args)

    async def run(store: Store) -> list[EventRecord]:
        since_s, until_s = await resolve_instants(store, since, until)
        flt = EventFilter(
            destination=args.destination, tenant=tenant, status=args.status, type=args.type,
            since_s=since_s, until_s=until_s, before_id=args.before,
            limit=args.limit).check()  # usage errors exit 2 before any lookup
        await listing_scope(store, args.destination, tenant)
        return await store.list_events(flt)

    found = await with_store(config, run)
    page = events_page_view(found, args.limit)
    if args.json:
        print_json(page)
        return 0
    rows = [{**e, "jobs": " ".join(f"{j['destination']}:{j['status']}" for j in e["jobs"])}
            for e in page["events"]]
    # The tenant: the jobs' destination names are its own (every tenant may have `billing`).
    print_table(rows, ["id", "tenant", "received_at", "type", "source", "source_event_id",
                       "message_id", "jobs"])
    if page["next_before"] is not None:
        print(f"(more: --before {page['next_before']})")
    return 0


# -- resend and retry now ------------------------------------------------------------------


async def resend_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline resend (JOB_ID | --destination D [--status] [--since] [--until])`."""
    return await _act(config, args, "resend")


async def retry_now_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline retry-now (JOB_ID | --destination D [--since] [--until])`."""
    return await _act(config, args, "retry_now")


def _instant_spec(text: str | None) -> InstantSpec | None:
    """A `--since`/`--until` value parsed (bad input: ConfigError, exit 2); an age like `10m`
    is counted back from the store's time once the store is open."""
    return None if text is None else parse_instant_spec(text)


async def _act(config: Config, args: argparse.Namespace, action: str) -> int:
    if (args.job_id is None) == (args.destination is None):
        return fail("give a JOB_ID or --destination NAME (one of them)", 2)
    since, until = _instant_spec(args.since), _instant_spec(args.until)
    tenant = tenant_arg(args)

    async def run(store: Store) -> tuple[JobSelection, BulkResult]:
        since_s, until_s = await resolve_instants(store, since, until)
        selection = JobSelection(
            job_id=args.job_id, destination=args.destination, tenant=tenant,
            status=getattr(args, "status", None), since_s=since_s, until_s=until_s,
            limit=args.limit).check(resend=action == "resend")  # usage errors exit 2
        if selection.destination is not None:  # NotFound (a live one): exit 1
            await store.get_destination(selection.destination, tenant=await destination_tenant(
                store, selection.destination, tenant))
        operation = store.resend if action == "resend" else store.retry_now
        return selection, await operation(selection, dry_run=args.dry_run)

    selection, result = await with_store(config, run)
    if not args.dry_run:
        audit(action, result, selection, args.reason, **operator())
    if args.json:
        print_json(bulk_result_view(action, result))
        return 0
    verb = {"resend": ("resent", "would resend"),
            "retry_now": ("brought forward", "would bring forward")}[action][args.dry_run]
    ids = ", ".join(map(str, result.job_ids[:20]))
    print(f"{verb} {result.count} job(s)" + (f": {ids}" if ids else "")
          + (", ..." if result.count > 20 else ""))
    if action == "retry_now" and selection.job_id is not None and result.count == 0:
        print(f"job {selection.job_id} was already due")
    if result.more:
        print(f"more jobs matched than --limit {selection.limit}; run it again for the rest")
    return 0
