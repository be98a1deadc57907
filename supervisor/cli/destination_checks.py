"""`hookline destinations filter-test` and `hookline destinations test`, and the `--filter` /
`--filter-file` options of `destinations add` and `update`: a destination's payload filter
(shared/policy/filters.py) and the checks that change nothing but a test event. They read
and write the store directly; a test delivery is made by the running service's workers."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hookline.shared.config import Config
from hookline.shared.errors import InvalidInput, InvalidSetting
from hookline.shared.policy.filters import check_filter
from hookline.shared.policy.inputs import EVENT_TYPE_RE, json_document
from hookline.shared.store import Store
from hookline.shared.store.delivery_probe import (
    CLAIM_ALLOWANCE_S,
    delivery_probe_view,
    first_outcome,
)
from hookline.shared.store.filter_tx import FilterTestRow
from hookline.supervisor.cli.common import (
    async_command,
    print_json,
    print_record,
    print_table,
    with_store,
)
from hookline.supervisor.cli.files import read_json_file
from hookline.supervisor.cli.tenants import add_tenant_flag, destination_tenant, tenant_arg

DEFAULT_LAST = 50
MAX_LAST = 1000


def add_filter_flags(parser: argparse.ArgumentParser, *, changing: bool = False) -> None:
    """`--filter JSON` and `--filter-file PATH` (one or the other)."""
    group = parser.add_mutually_exclusive_group()
    removes = " ('{}' or 'null' removes it)" if changing else ""
    group.add_argument("--filter", metavar="JSON",
                       help="a payload filter: only events it matches are delivered, e.g. "
                            "'{\"data.amount\": {\"$gte\": 1000}}'" + removes)
    group.add_argument("--filter-file", metavar="PATH", help="the payload filter, from a file")


def filter_option(args: argparse.Namespace) -> tuple[bool, dict[str, Any] | None]:
    """(given, the checked filter) from `--filter` / `--filter-file`.

    Raises:
        InvalidSetting("filter"): not JSON, or a bad filter (exit 2).
        InvalidInput("--filter-file"): the file cannot be read or is not JSON (exit 2).
    """
    text = getattr(args, "filter", None)
    path = getattr(args, "filter_file", None)
    if text is None and path is None:
        return False, None
    if path is not None:
        return True, check_filter(read_json_file(path, "--filter-file"))
    try:
        value = json_document("filter", text or "")
    except InvalidInput as exc:
        raise InvalidSetting("filter", exc.detail) from None
    return True, check_filter(value)


def add_check_actions(dest: Any) -> None:
    """Add `destinations filter-test` and `destinations test`."""
    ft = dest.add_parser("filter-test", help="which of the newest stored events a payload "
                                             "filter lets through (changes nothing)")
    ft.add_argument("name")
    add_filter_flags(ft)
    ft.add_argument("--last", type=int, default=DEFAULT_LAST,
                    help=f"how many of the newest events (default {DEFAULT_LAST}, at most "
                         f"{MAX_LAST})")
    add_tenant_flag(ft)
    ft.add_argument("--json", action="store_true")
    ft.set_defaults(handler=async_command(filter_test_cmd))

    test = dest.add_parser("test", help="send a test event (a signed delivery) and show its "
                                        "first attempt's outcome")
    test.add_argument("name")
    test.add_argument("--type", help="the event type to send (default hookline.ping)")
    add_tenant_flag(test)
    test.add_argument("--json", action="store_true")
    test.set_defaults(handler=async_command(test_cmd))


async def filter_test_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations filter-test NAME [--filter JSON | --filter-file PATH] [--last N]`:
    without a filter, the destination's own is tried."""
    given, value = filter_option(args)
    if not 1 <= args.last <= MAX_LAST:
        raise InvalidInput("last", f"must be from 1 to {MAX_LAST}")
    tenant = tenant_arg(args)

    async def run(store: Store) -> tuple[list[FilterTestRow], dict[str, Any] | None]:
        scope = await destination_tenant(store, args.name, tenant)
        used = value if given else (await store.get_destination(args.name, tenant=scope)).filter
        return await store.filter_test(args.name, tenant=scope, filter=value,
                                       use_stored=not given, last=args.last), used

    found, used = await with_store(config, run)
    rows = [{"event_id": r.event_id, "type": r.type, "source": r.source,
             "received_at": r.received_at, "subscribed": r.subscribed,
             "matched": r.matched, "body_purged": r.body_purged} for r in found]
    counts = {"matched": sum(1 for r in found if r.subscribed and r.matched),
              "filtered": sum(1 for r in found if r.subscribed and not r.matched),
              "not_subscribed": sum(1 for r in found if not r.subscribed)}
    if args.json:
        print_json({"destination": args.name, "filter": used, "last": args.last, **counts,
                    "events": rows})
        return 0
    print(f"filter: {json.dumps(used) if used else '(none: every subscribed event)'}")
    print_table(rows, ["event_id", "type", "source", "received_at", "subscribed", "matched"])
    print(f"{counts['matched']} matched, {counts['filtered']} filtered out, "
          f"{counts['not_subscribed']} not subscribed, of the newest {len(found)} events")
    return 0


async def test_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations test NAME [--type T]`: waits for the first attempt (at most the
    attempt timeout and a claim allowance; the service's workers deliver it). Exit 0 when it
    was delivered, 1 when the receiver refused it or it did not finish in time."""
    if args.type is not None and not EVENT_TYPE_RE.fullmatch(args.type):
        raise InvalidInput("type", f"must match {EVENT_TYPE_RE.pattern}, not {args.type!r}")
    tenant = tenant_arg(args)

    paused: list[str] = []  # the destination's pause reason, when it is paused

    async def run(store: Store) -> dict[str, Any]:
        scope = await destination_tenant(store, args.name, tenant)
        dest = await store.get_destination(args.name, tenant=scope)
        sent = await store.send_test_event(args.name, tenant=scope, event_type=args.type)
        # A paused destination's job waits for its resume: no attempt to wait for.
        bound_s = 0.0 if dest.paused else (
            (dest.timeout_s or config.attempt_timeout_s) + CLAIM_ALLOWANCE_S)
        if dest.paused:
            paused.append(dest.paused_reason or "paused")
        story, attempt = await first_outcome(store, sent.job_id, scope, bound_s)
        return delivery_probe_view(sent, story, attempt, bound_s)

    out = await with_store(config, run)
    attempt = out["attempt"]
    if args.json:
        print_json(out)
    elif attempt is None and paused:
        print(f"test event sent (job {out['job_id']}): destination {args.name!r} is paused "
              f"({paused[0]}); the job waits until `hookline resume {args.name}`")
    elif attempt is None:
        print(f"test event sent (job {out['job_id']}): no attempt finished within "
              f"{out['waited_s']:g} s; the job is {out['job_status']} (is the service running?)")
    else:
        print_record({"job": out["job_id"], "type": out["type"], **attempt},
                     ["job", "type", "outcome", "status_code", "duration_s", "error",
                      "response_excerpt"])
    return 0 if attempt is not None and attempt["outcome"] == "delivered" else 1
