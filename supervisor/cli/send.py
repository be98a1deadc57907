"""`hookline send TYPE [--data JSON | --data-file F] [--id ID] [--source S] [--tenant T]
[--url URL] [--token T] [--deadline S] [--json]`: publish one event through the service's HTTP
API with the publishing client (hookline_client), retrying until it is confirmed or the
deadline passes.

The URL defaults to the `listen` setting (a wildcard address becomes loopback) and the token
to the `ingest_token` setting (HOOKLINE_INGEST_TOKEN or ingest_token_file), so on the
service's host `hookline send invoice.paid --data '{"amount": 42}'` needs nothing else.
Exit codes: 0 accepted or duplicate (both mean stored once), 2 refused by the service for the
event or the token (a 4xx: fix the command) or bad arguments, 1 unavailable until the deadline
or refused for its tenant, unknown or disabled (send again later with the same --id).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hookline_client import HooklineClient, HooklineRejected, HooklineUnavailable, SendResult

from hookline.shared.config import Config
from hookline.shared.config_checks import listen_host_port
from hookline.shared.errors import ConfigError
from hookline.supervisor.cli.common import RUNTIME_EXIT, USAGE_EXIT, fail

_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def register(sub: Any) -> None:
    """Add `send` to the CLI."""
    send = sub.add_parser(
        "send", help="publish one event to the running service (retried until confirmed)",
        description="Publish one event to POST /v1/events and wait until it is stored. "
                    "Exit 0: accepted or duplicate; 2: refused (4xx) for the event or the token; "
                    "1: unavailable until the deadline, or its tenant unknown or disabled "
                    "(send again with the same --id).")
    send.add_argument("type", metavar="TYPE", help="the event type, e.g. invoice.paid")
    data = send.add_mutually_exclusive_group()
    data.add_argument("--data", metavar="JSON", help="the event's data, any JSON (default {})")
    data.add_argument("--data-file", metavar="FILE", help="read the data from FILE (- : stdin)")
    send.add_argument("--id", help="the event id (default: generated and printed); sending "
                                   "again with the same id is recognised as a duplicate")
    send.add_argument("--source", help="the id namespace (the service's default: api)")
    send.add_argument("--tenant", help="the tenant (customer) it is for: only its destinations "
                                       "receive it (default: the default tenant)")
    send.add_argument("--url", help="the service's base URL (default: http:// and the "
                                    "listen setting; send posts to a running service, so "
                                    "--db does not choose where the event goes)")
    send.add_argument("--token", help="the ingest token (default: the ingest_token setting; "
                                      "prefer HOOKLINE_INGEST_TOKEN: a flag is visible in ps)")
    send.add_argument("--deadline", type=float, default=30.0, metavar="SECONDS",
                      help="give up after this long, retries included (default 30)")
    send.add_argument("--json", action="store_true", help="print the answer as JSON")
    send.set_defaults(handler=send_command)


def send_command(config: Config, args: argparse.Namespace) -> int:
    """Send the event; print the outcome (module docstring for the exit codes)."""
    try:
        data = _data(args)
        url = args.url or _listen_url(config.listen)
    except (ValueError, OSError, ConfigError) as exc:
        return fail(str(exc), USAGE_EXIT)
    token = args.token or config.ingest_token
    if not token:
        return fail("no ingest token: set HOOKLINE_INGEST_TOKEN (or ingest_token_file, or "
                    "pass --token)", USAGE_EXIT)
    try:
        with HooklineClient(url, token, deadline_s=args.deadline) as client:
            result = client.send(args.type, data, id=args.id, source=args.source,
                                 tenant=args.tenant)
    except ValueError as exc:  # a malformed --url or --deadline
        return fail(str(exc), USAGE_EXIT)
    except HooklineRejected as exc:
        # As every command: what is not there or not applicable now (an unknown or disabled
        # tenant) failed at run time (1); a bad value or token is fixed in the command (2).
        at_run_time = exc.status in (404, 409) or exc.code == "tenant_disabled"
        hint = ""
        if exc.status == 401:  # e.g. a second terminal whose variables made a token anew
            sent = "--token" if args.token else "the ingest_token setting (HOOKLINE_INGEST_TOKEN)"
            hint = f"; the token from {sent} is not the running service's ingest_token"
        return fail(f"{exc}{hint}", RUNTIME_EXIT if at_run_time else USAGE_EXIT)
    except HooklineUnavailable as exc:
        return fail(f"{exc}; send again with --id {exc.event_id}", RUNTIME_EXIT)
    _print(result, args.json)
    return 0


def send_view(result: SendResult) -> dict[str, Any]:
    """The JSON `hookline send --json` prints: the service's answer to `POST /v1/events`
    (`event_id`, `message_id`, `jobs`, `duplicate`), plus the `id` sent and the `attempts`."""
    return {"event_id": result.event_id, "message_id": result.message_id, "jobs": result.jobs,
            "duplicate": result.duplicate, "id": result.id, "attempts": result.attempts}


def _print(result: SendResult, as_json: bool) -> None:
    if as_json:
        print(json.dumps(send_view(result)))
        return
    print(f"{result.outcome}: id {result.id}, event {result.event_id}, "
          f"message {result.message_id}, {result.jobs} job(s)")
    if result.accepted and result.jobs == 0:
        # The answer does not say whether no destination subscribes or payload filters
        # turned the event away, so the note names both.
        print("note: no destination took it (none subscribes, or their payload filters "
              "turned it away), so nothing will be delivered (hookline destinations list)",
              file=sys.stderr)


def _data(args: argparse.Namespace) -> Any:
    """The event's data from --data or --data-file. Raises ValueError or OSError."""
    if args.data_file is not None:
        where = "standard input" if args.data_file == "-" else args.data_file
        try:
            text = (sys.stdin.read() if args.data_file == "-"
                    else Path(args.data_file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise OSError(f"--data-file: cannot read {where}: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise ValueError(f"--data-file: {where} is not UTF-8 text ({exc.reason} at byte "
                             f"{exc.start})") from exc
    elif args.data is not None:
        where, text = "--data", args.data
    else:
        return {}
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc}") from exc


def _listen_url(listen: str) -> str:
    """`http://HOST:PORT` for the `listen` setting, a wildcard host replaced by loopback."""
    host, port = listen_host_port(listen)
    host = _WILDCARDS.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
