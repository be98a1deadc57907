"""`hookline tenants token ID` and `hookline tenants revoke-tokens ID`: tenant tokens, minted
and revoked in the store directly (the same key and epoch every ingest host checks, so they
work whether or not the service runs). Each is audited: one log line on stderr naming the
tenant and the OS user who ran it (never the token). `--json` prints what the admin API
answers (`POST /v1/admin/tenants/{id}/tokens`, `.../revoke-tokens`).

Exit codes: 0 ok, 1 unknown or disabled tenant, 2 bad input.
"""

from __future__ import annotations

import argparse
from typing import Any

from hookline.shared import config_checks as checks
from hookline.shared.config import Config
from hookline.shared.errors import ConfigError, InvalidSetting
from hookline.shared.logs import get_logger
from hookline.shared.tenant_models import tenant_id
from hookline.shared.tenant_tokens import (
    CAPABILITIES,
    DEFAULT_TTL_S,
    grant,
    issue,
    issued_view,
    ttl_seconds,
)
from hookline.shared.timeparse import parse_duration
from hookline.supervisor.cli.common import (
    async_command,
    operator,
    print_json,
    print_record,
    with_store,
)


def add_actions(group: Any) -> None:
    """Add `token` and `revoke-tokens` to the `hookline tenants` group."""
    token = group.add_parser("token", help="mint a short-lived tenant token and its portal URL")
    token.add_argument("id", help="the tenant")
    token.add_argument("--ttl", default=f"{DEFAULT_TTL_S}s",
                       help="lifetime, e.g. 30m, 1h (at most 24h; default 1h)")
    token.add_argument("--read-only", action="store_true",
                       help="view only (and view_secret when given with --capability)")
    token.add_argument("--capability", action="append", choices=CAPABILITIES,
                       metavar="CAPABILITY",
                       help="grant only these (repeatable; default: all of "
                            f"{', '.join(CAPABILITIES)})")
    token.add_argument("--base-url", metavar="URL",
                       help="the address tenants reach ingest at, for the portal URL "
                            "(default: the public_url setting, else http:// + listen)")
    token.add_argument("--json", action="store_true")
    token.set_defaults(handler=async_command(token_cmd))

    revoke = group.add_parser("revoke-tokens",
                              help="revoke every token of a tenant (they stop working at once)")
    revoke.add_argument("id", help="the tenant")
    revoke.add_argument("--json", action="store_true")
    revoke.set_defaults(handler=async_command(revoke_cmd))


def ttl_flag(text: str) -> int:
    """`--ttl` as whole seconds (1 s to 24 h). Raises InvalidSetting("ttl_s") (exit 2)."""
    try:
        seconds = parse_duration(text)
    except ConfigError as exc:
        raise InvalidSetting("ttl_s", str(exc)) from None
    if seconds != int(seconds):
        raise InvalidSetting("ttl_s", "must be whole seconds")
    return ttl_seconds(int(seconds))


async def token_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline tenants token ID [--ttl 1h] [--read-only] [--capability C ...]`."""
    tenant = tenant_id(args.id, field="id", reserved_ok=True)  # usage errors exit 2 first
    ttl_s = ttl_flag(args.ttl)
    if args.base_url is not None:
        checks.base_url("base_url", args.base_url)
    capabilities, read_only = grant(args.capability, args.read_only or None)
    token, claims = await with_store(config, lambda s: issue(
        s, tenant, ttl_s=ttl_s, capabilities=capabilities, read_only=read_only))
    get_logger().info("tenant_token_minted", tenant=tenant, expires_at=claims.expires_at,
                      capabilities=list(capabilities), read_only=read_only, **operator())
    view = issued_view(token, claims,
                       args.base_url or config.public_url or f"http://{config.listen}")
    if args.json:
        print_json(view)
    else:
        print_record(view)
    return 0


async def revoke_cmd(config: Config, args: argparse.Namespace) -> int:
    """`hookline tenants revoke-tokens ID`."""
    tenant = tenant_id(args.id, field="id", reserved_ok=True)
    await with_store(config, lambda s: s.revoke_tenant_tokens(tenant))
    get_logger().info("tenant_tokens_revoked", tenant=tenant, **operator())
    if args.json:
        print_json({"tenant": tenant, "revoked": True})
    else:
        print(f"revoked every token of tenant {tenant}: they stop working at their next request")
    return 0
