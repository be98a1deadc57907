"""`hookline destinations rotate-secret|secret|expire-previous-secret`: a destination's signing
secret. They change the store directly (a running service's workers sign the next claim with
the new secrets). Each is audited: one log line on stderr naming the destination and the OS
user who ran it (never the secret). `--json` prints the admin API's answer for the same call.
"""

from __future__ import annotations

import argparse
from typing import Any

from hookline.shared.config import Config
from hookline.shared.endpoint_models import Destination
from hookline.shared.errors import ConfigError, InvalidSetting
from hookline.shared.logs import get_logger
from hookline.shared.policy import rules
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.shared.timeparse import parse_duration
from hookline.shared.views import destination_secret_view, previous_secret_expired_view
from hookline.supervisor.cli.common import async_command, operator, print_json, with_store
from hookline.supervisor.cli.human import iso_time
from hookline.supervisor.cli.tenants import add_tenant_flag, destination_tenant, named, tenant_arg


def add_secret_actions(dest: Any) -> None:
    """Add `rotate-secret`, `secret` and `expire-previous-secret` to `hookline destinations`."""
    rotate = dest.add_parser(
        "rotate-secret", help="switch to a new signing secret; the old one keeps signing "
                              "(both signatures on every request) for the overlap")
    rotate.add_argument("name")
    rotate.add_argument("--secret", help="the new whsec_ secret (default: a generated one)")
    rotate.add_argument("--overlap", default="24h",
                        help="how long the old secret keeps signing, e.g. 90s, 30m, 24h, 7d "
                             "(0 to 7d; default 24h)")
    add_tenant_flag(rotate)
    rotate.add_argument("--json", action="store_true")
    rotate.set_defaults(handler=async_command(rotate_cmd))

    show = dest.add_parser("secret", help="print the current signing secret (audited)")
    show.add_argument("name")
    add_tenant_flag(show)
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=async_command(reveal_cmd))

    expire = dest.add_parser("expire-previous-secret",
                             help="end a rotation's overlap now: only the new secret signs")
    expire.add_argument("name")
    add_tenant_flag(expire)
    expire.add_argument("--json", action="store_true")
    expire.set_defaults(handler=async_command(expire_cmd))




def overlap_seconds(text: str) -> float:
    """`--overlap` text (a duration) -> seconds in the rule book's bounds. Raises
    InvalidSetting("overlap_s")."""
    try:
        seconds = parse_duration(text)
    except ConfigError as exc:
        raise InvalidSetting("overlap_s", str(exc)) from None
    return rules.rotation_overlap(seconds)


async def rotate_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations rotate-secret NAME [--secret S] [--overlap 24h]`."""
    overlap = overlap_seconds(args.overlap)  # usage errors exit 2 before the store opens
    secret = rules.destination_secret(args.secret) if args.secret else generate_secret()
    tenant = tenant_arg(args)

    async def rotate(store: Store) -> Destination:
        return await store.rotate_secret(args.name, secret, overlap,
                                         tenant=await destination_tenant(store, args.name,
                                                                         tenant))

    dest = await with_store(config, rotate)
    _audit("secret_rotated", dest, generated=not args.secret,
           previous_secret_until=dest.previous_secret_until)
    if args.json:
        print_json(destination_secret_view(dest))
    else:
        print(f"rotated the secret of {named(dest.name, dest.tenant)}")
        print(f"new signing secret: {dest.secret}")
        print(f"the previous secret signs too until {iso_time(dest.previous_secret_until)}")
    return 0


async def reveal_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations secret NAME`: the current secret, whole."""
    tenant = tenant_arg(args)

    async def reveal(store: Store) -> Destination:
        return await store.get_destination(
            args.name, tenant=await destination_tenant(store, args.name, tenant))

    dest = await with_store(config, reveal)
    _audit("secret_revealed", dest)
    if args.json:
        print_json(destination_secret_view(dest))
    else:
        print(dest.secret)
    return 0


async def expire_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline destinations expire-previous-secret NAME`."""
    tenant = tenant_arg(args)

    async def expire(store: Store) -> tuple[Destination, bool]:
        return await store.expire_previous_secret(
            args.name, tenant=await destination_tenant(store, args.name, tenant))

    dest, expired = await with_store(config, expire)
    _audit("previous_secret_expired", dest, expired=expired)
    if args.json:
        print_json(previous_secret_expired_view(dest, expired))
    else:
        name = named(dest.name, dest.tenant)
        print(f"{name}: the previous secret signs no more" if expired
              else f"{name}: no previous secret was still signing; none is kept now")
    return 0


def _audit(event: str, dest: Destination, **facts: Any) -> None:
    get_logger().info(event, destination=dest.name, tenant=dest.tenant, **operator(), **facts)

