"""A local webhook receiver that plays one or more destinations for demos, tests and rehearsals.

Each endpoint is served at `POST /{name}` with its own `whsec_` secret and a :class:`Behaviour`.
Requests are verified with `standardwebhooks` and recorded; the first verified request for a
`webhook-id` processed for business records an *effect*, later ones count as duplicates.
`GET /_summary` and `GET /_receipts` serve counts and records; `GET /_count` just the
numbers of requests and effects (cheap enough to poll during a benchmark); `PUT
/_behaviour/{name}` with a behaviour spec as its body (e.g. `status:503`, `hang`, `ok`) changes
how an endpoint answers from then on (outage drills: a destination goes down and comes back on
the same port). CLI: see :func:`main`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, cast

import structlog
from aiohttp import web
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from hookline.shared.errors import ConfigError
from hookline.shared.logs import configure_logging
from hookline.shared.signing import secret_key

log = structlog.get_logger()

Kind = Literal["ok", "fail", "status", "retry_after", "gone", "redirect", "slow", "slow_first",
               "trickle", "hang", "drop_first"]
TRICKLE_BODY = b'{"ok":true}'
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # so `/_summary` cannot be shadowed
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True, slots=True, kw_only=True)
class Behaviour:
    """How an endpoint answers; build one with :func:`parse_behaviour` or directly.

    `count`: 500s per webhook-id before a 200 (`fail`); `status`: the code always answered
    (`status`); `delay_s`: seconds before answering (`slow`) or per body byte (`trickle`);
    `retry_after_s`: the Retry-After value (`retry_after`); `url`: the Location (`redirect`).
    """

    kind: Kind = "ok"
    count: int = 0
    status: int = 200
    delay_s: float = 0.0
    retry_after_s: int = 0
    url: str = ""

    @property
    def spec(self) -> str:
        """The string spec that :func:`parse_behaviour` turns back into this behaviour."""
        arg = {"fail": self.count, "status": self.status, "retry_after": self.retry_after_s,
               "slow": self.delay_s, "slow_first": self.delay_s, "trickle": self.delay_s,
               "redirect": self.url}.get(self.kind)
        return self.kind if arg is None else f"{self.kind}:{arg}"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One destination played by the receiver, served at `POST /{name}`."""

    name: str
    secret: str
    behaviour: Behaviour = field(default_factory=Behaviour)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRecord:
    """One request; `received_at` is unix seconds, `status` an int, `dropped` or `hung`."""

    endpoint: str
    webhook_id: str | None
    received_at: float
    verified: bool
    status: int | str
    body_sha256: str
    body_bytes: int
    duplicate: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class EffectRecord:
    """The one business effect of a webhook-id at an endpoint; `received_at` is unix seconds."""

    endpoint: str
    webhook_id: str
    received_at: float
    body_sha256: str
    body_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What to do with one verified request: the pure output of :func:`decide`."""

    action: Literal["respond", "trickle", "drop", "hang"] = "respond"
    status: int = 200
    effect: bool = False
    delay_s: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()
    error: str | None = None


def parse_behaviour(spec: str) -> Behaviour:
    """Parse a behaviour spec such as `ok`, `fail:2`, `status:503` or `redirect:http://x/`.

    Args:
        spec: a name, then `:ARG` for those taking one; `always:CODE` means `status:CODE`.

    Returns:
        The parsed behaviour.

    Raises:
        ConfigError: unknown name, or a missing, extra or malformed argument.
    """
    name, _, arg = spec.strip().partition(":")
    try:
        if name in ("ok", "gone", "hang", "drop_first") and not arg:
            return Behaviour(kind=cast(Kind, name))
        if name == "fail":
            return Behaviour(kind="fail", count=int(_bounded(int(arg), 0, 10**6)))
        if name in ("status", "always"):
            return Behaviour(kind="status", status=int(_bounded(int(arg), 100, 599)))
        if name == "retry_after":
            return Behaviour(kind="retry_after", retry_after_s=int(_bounded(int(arg), 0, 10**6)))
        if name in ("slow", "slow_first", "trickle"):
            return Behaviour(kind=cast(Kind, name), delay_s=_bounded(float(arg), 0, 3600))
        if name == "redirect" and arg:
            return Behaviour(kind="redirect", url=arg)
    except ValueError as exc:
        raise ConfigError(f"bad behaviour {spec!r}: {exc}") from exc
    raise ConfigError(f"unknown behaviour {spec!r}")


def _bounded(value: float, low: float, high: float) -> float:
    if not low <= value <= high:
        raise ValueError(f"{value} is outside {low}..{high}")
    return value


def parse_endpoint(spec: str) -> Endpoint:
    """Parse a CLI endpoint spec `NAME=SECRET[:BEHAVIOUR]` (behaviour defaults to `ok`).

    Raises:
        ConfigError: the spec lacks `NAME=` or its behaviour does not parse.
    """
    name, sep, rest = spec.partition("=")
    if not sep or not name or not rest:
        raise ConfigError(f"bad endpoint {spec!r}; expected NAME=SECRET[:BEHAVIOUR]")
    secret, _, behaviour = rest.partition(":")
    return Endpoint(name, secret, parse_behaviour(behaviour or "ok"))


def decide(behaviour: Behaviour, attempt: int) -> Decision:
    """Decide the answer to the `attempt`-th verified request (1-based) for one webhook-id."""
    match behaviour.kind:
        case "fail" if attempt <= behaviour.count:
            return Decision(status=500, error="injected_failure")
        case "status":
            ok = 200 <= behaviour.status < 300
            return Decision(status=behaviour.status, effect=ok,
                            error=None if ok else "injected_status")
        case "retry_after" if attempt == 1:
            return Decision(status=429, error="rate_limited",
                            headers=(("Retry-After", str(behaviour.retry_after_s)),))
        case "gone":
            return Decision(status=410, error="gone")
        case "redirect":
            return Decision(status=302, headers=(("Location", behaviour.url),))
        case "slow":
            return Decision(effect=True, delay_s=behaviour.delay_s)
        case "slow_first" if attempt == 1:  # hold the first request only (stale-finish drills)
            return Decision(effect=True, delay_s=behaviour.delay_s)
        case "trickle":
            return Decision(action="trickle", effect=True, delay_s=behaviour.delay_s)
        case "hang":
            return Decision(action="hang")
        case "drop_first" if attempt == 1:
            return Decision(action="drop", effect=True)
    return Decision(effect=True)


@dataclass(slots=True)
class _EndpointState:
    endpoint: Endpoint
    webhook: Webhook
    attempts: Counter[str] = field(default_factory=Counter)  # verified requests per webhook-id
    effect_ids: set[str] = field(default_factory=set)
    in_flight: int = 0
    max_in_flight: int = 0


class Receiver:
    """Serve endpoints on one local port and record what they receive.

    Use as `async with Receiver([...]) as r:` (127.0.0.1, a free port) or call start/stop.
    """

    def __init__(self, endpoints: Sequence[Endpoint], *, requests_log: Path | str | None = None,
                 shutdown_timeout_s: float = 2.0,
                 timestamp_tolerance_s: float | None = None) -> None:
        """Check the endpoints; nothing is bound until :meth:`start`.

        Args:
            endpoints: the destinations to play; names unique, `[A-Za-z0-9][A-Za-z0-9_.-]*`.
            requests_log: file to append every request and effect to, as JSON lines.
            shutdown_timeout_s: seconds :meth:`stop` waits for handlers before cancelling them.
            timestamp_tolerance_s: how far `webhook-timestamp` may be from this host's clock,
                seconds, either way; None: the standard's 5 minutes (standardwebhooks checks it).

        Raises:
            ConfigError: a bad or duplicate name, or a secret that is not `whsec_` base64.
        """
        self._states: dict[str, _EndpointState] = {}
        for endpoint in endpoints:
            if not _NAME_RE.fullmatch(endpoint.name) or endpoint.name in self._states:
                raise ConfigError(f"bad or duplicate endpoint name {endpoint.name!r}")
            webhook = Webhook(secret_key(endpoint.secret))
            self._states[endpoint.name] = _EndpointState(endpoint, webhook)
        self._log_path = Path(requests_log) if requests_log is not None else None
        self._shutdown_timeout_s = shutdown_timeout_s
        self._timestamp_tolerance_s = timestamp_tolerance_s
        self._requests: list[RequestRecord] = []
        self._effects: list[EffectRecord] = []
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()
        self._base_url = ""
        self.port = 0

    async def __aenter__(self) -> Receiver:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Bind and serve.

        Args:
            host: address to listen on.
            port: TCP port; 0 picks a free one.

        Returns:
            The bound port.
        """
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_get("/_summary", self._handle_summary)
        app.router.add_get("/_receipts", self._handle_receipts)
        app.router.add_get("/_count", self._handle_count)
        app.router.add_put("/_behaviour/{name}", self._handle_set_behaviour)
        app.router.add_post("/{name}", self._handle_post)
        self._runner = web.AppRunner(app, access_log=None,
                                     shutdown_timeout=self._shutdown_timeout_s)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()
        self.port = int(self._runner.addresses[0][1])
        self._base_url = f"http://{host}:{self.port}"
        return self.port

    def url(self, name: str) -> str:
        """The URL of endpoint `name` (valid after :meth:`start`)."""
        return f"{self._base_url}/{name}"

    async def stop(self) -> None:
        """Release hung handlers, stop listening, wait (bounded) for handlers to finish."""
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def requests(self) -> list[RequestRecord]:
        """Every request so far, in the order they were decided."""
        return list(self._requests)

    @property
    def effects(self) -> list[EffectRecord]:
        """Every business effect so far (at most one per webhook-id and endpoint)."""
        return list(self._effects)

    def max_concurrent(self, name: str) -> int:
        """The most requests endpoint `name` has ever handled at the same time."""
        return self._states[name].max_in_flight

    def in_flight(self, name: str) -> int:
        """The number of requests endpoint `name` is handling now."""
        return self._states[name].in_flight

    def set_behaviour(self, name: str, behaviour: Behaviour) -> None:
        """Make endpoint `name` answer with `behaviour` from its next request on. Requests
        already hanging keep hanging until the client gives up or the receiver stops.

        Raises:
            KeyError: no endpoint `name`.
        """
        state = self._states[name]
        state.endpoint = replace(state.endpoint, behaviour=behaviour)
        log.info("receiver_behaviour_set", endpoint=name, behaviour=behaviour.spec)

    def summary(self) -> dict[str, Any]:
        """Counts per endpoint and in total, as served by `GET /_summary`."""
        per = {name: self._endpoint_summary(state) for name, state in self._states.items()}
        totals: dict[str, Any] = {key: sum(item[key] for item in per.values())
                                  for key in ("requests", "verified", "effects", "duplicates")}
        totals["max_concurrent"] = max((i["max_concurrent"] for i in per.values()), default=0)
        totals["statuses"] = dict(Counter(str(r.status) for r in self._requests))
        return {"endpoints": per, "totals": totals}

    def _endpoint_summary(self, state: _EndpointState) -> dict[str, Any]:
        mine = [r for r in self._requests if r.endpoint == state.endpoint.name]
        return {"behaviour": state.endpoint.behaviour.spec, "requests": len(mine),
                "verified": sum(r.verified for r in mine), "effects": len(state.effect_ids),
                "duplicates": sum(r.duplicate for r in mine),
                "max_concurrent": state.max_in_flight,
                "statuses": dict(Counter(str(r.status) for r in mine))}

    def receipts(self) -> dict[str, Any]:
        """Every effect and request as plain dicts, as served by `GET /_receipts`."""
        return {"effects": [asdict(e) for e in self._effects],
                "requests": [asdict(r) for r in self._requests]}

    async def _handle_summary(self, request: web.Request) -> web.Response:
        return web.json_response(self.summary())

    async def _handle_count(self, request: web.Request) -> web.Response:
        return web.json_response({"requests": len(self._requests),
                                  "effects": len(self._effects)})

    async def _handle_receipts(self, request: web.Request) -> web.Response:
        return web.json_response(self.receipts())

    async def _handle_set_behaviour(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self._states:
            return _json_error(404, "unknown_endpoint", name)
        try:
            behaviour = parse_behaviour(await request.text())
        except ConfigError as exc:
            return _json_error(400, "bad_behaviour", str(exc))
        self.set_behaviour(name, behaviour)
        return web.json_response({"endpoint": name, "behaviour": behaviour.spec})

    async def _handle_post(self, request: web.Request) -> web.StreamResponse:
        state = self._states.get(request.match_info["name"])
        if state is None:
            return _json_error(404, "unknown_endpoint", request.match_info["name"])
        state.in_flight += 1
        state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            return await self._process(state, request)
        finally:
            state.in_flight -= 1

    async def _process(self, state: _EndpointState, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        record = RequestRecord(
            endpoint=state.endpoint.name, webhook_id=request.headers.get("webhook-id"),
            received_at=time.time(), verified=False, status=401,
            body_sha256=hashlib.sha256(body).hexdigest(), body_bytes=len(body), duplicate=False)
        try:
            _verify(state.webhook, body, dict(request.headers), self._timestamp_tolerance_s)
        except (WebhookVerificationError, ValueError) as exc:  # ValueError: malformed header/body
            self._record_request(record)
            return _json_error(401, "signature_invalid", str(exc) or type(exc).__name__)
        webhook_id = cast(str, record.webhook_id)  # verify() rejects a request without one
        state.attempts[webhook_id] += 1
        decision = decide(state.endpoint.behaviour, state.attempts[webhook_id])
        if (decision.action == "respond" and decision.delay_s > 0
                and await self._pause(decision.delay_s)):
            decision = Decision(status=503, error="receiver_stopping")
        duplicate = decision.effect and not self._record_effect(state, record)
        label = {"drop": "dropped", "hang": "hung"}.get(decision.action, decision.status)
        self._record_request(replace(record, verified=True, status=label, duplicate=duplicate))
        if decision.action == "hang":
            await self._stopping.wait()
        if decision.action in ("drop", "hang"):
            return _drop(request, webhook_id)
        if decision.action == "trickle":
            return await self._trickle(request, decision.delay_s)
        if decision.error is not None:
            detail = f"behaviour {state.endpoint.behaviour.spec} answers {decision.status}"
            return _json_error(decision.status, decision.error, detail, decision.headers)
        return web.json_response({"ok": True, "duplicate": duplicate}, status=decision.status,
                                 headers=decision.headers)

    def _record_effect(self, state: _EndpointState, record: RequestRecord) -> bool:
        """Record the business effect unless this webhook-id has one; True if recorded."""
        webhook_id = cast(str, record.webhook_id)
        if webhook_id in state.effect_ids:
            return False
        state.effect_ids.add(webhook_id)
        effect = EffectRecord(endpoint=record.endpoint, webhook_id=webhook_id,
                              received_at=record.received_at, body_sha256=record.body_sha256,
                              body_bytes=record.body_bytes)
        self._effects.append(effect)
        self._append_log("effect", asdict(effect))
        log.info("receiver_effect", endpoint=record.endpoint, webhook_id=webhook_id)
        return True

    def _record_request(self, record: RequestRecord) -> None:
        self._requests.append(record)
        self._append_log("request", asdict(record))
        log.info("receiver_request", endpoint=record.endpoint, webhook_id=record.webhook_id,
                 verified=record.verified, status=record.status, duplicate=record.duplicate)

    def _append_log(self, kind: str, fields: dict[str, Any]) -> None:
        if self._log_path is not None:
            with self._log_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps({"record": kind, **fields}, sort_keys=True) + "\n")

    async def _pause(self, delay_s: float) -> bool:
        """Sleep `delay_s` seconds; True if the receiver began stopping meanwhile."""
        try:
            await asyncio.wait_for(self._stopping.wait(), delay_s)
        except TimeoutError:
            return False
        return True

    async def _trickle(self, request: web.Request, delay_s: float) -> web.StreamResponse:
        """Send 200 and its headers at once, then the body one byte every `delay_s` seconds."""
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.content_length = len(TRICKLE_BODY)
        try:
            await response.prepare(request)
            for index in range(len(TRICKLE_BODY)):
                if await self._pause(delay_s):
                    break
                await response.write(TRICKLE_BODY[index:index + 1])
            else:
                await response.write_eof()
        except ConnectionError:  # the client gave up; aiohttp's own write_eof fails quietly too
            log.info("receiver_trickle_aborted", path=request.path)
        return response


def _json_error(status: int, code: str, detail: str,
                headers: tuple[tuple[str, str], ...] = ()) -> web.Response:
    return web.json_response({"error": code, "detail": detail}, status=status, headers=headers)


def _drop(request: web.Request, webhook_id: str) -> web.StreamResponse:
    """Close the connection with nothing written; the response returned is never sent.

    aiohttp then fails to write that response to the closing transport, raising
    ConnectionResetError inside its `finish_response`, which it treats as a premature client
    disconnect (a debug log line): no traceback, and the client reads EOF with no status line.
    """
    if request.transport is not None:
        request.transport.close()
    log.info("receiver_dropped", path=request.path, webhook_id=webhook_id)
    return web.Response(status=204)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiverConfig:
    """What `hookline receiver` / `python -m hookline.rehearsal.receiver` runs."""

    host: str = "127.0.0.1"
    port: int = 0
    endpoints: tuple[Endpoint, ...] = ()
    requests_log: Path | None = None
    timestamp_tolerance_s: float | None = None


async def run(config: ReceiverConfig,
              on_listening: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Serve until SIGTERM or SIGINT.

    Args:
        config: where to listen and which endpoints to play.
        on_listening: called with the bound port once listening.

    Returns:
        The final :meth:`Receiver.summary`.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    receiver = Receiver(config.endpoints, requests_log=config.requests_log,
                        timestamp_tolerance_s=config.timestamp_tolerance_s)
    for signum in _SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    try:
        port = await receiver.start(config.host, config.port)
        if on_listening is not None:
            on_listening(port)
        await stop.wait()
    finally:
        for signum in _SIGNALS:
            loop.remove_signal_handler(signum)
        await receiver.stop()
    return receiver.summary()


def _verify(webhook: Webhook, body: bytes, headers: dict[str, str],
            tolerance_s: float | None) -> None:
    """Check a request's Standard Webhooks signature with the standardwebhooks library.

    With `tolerance_s` the timestamp is checked here instead of by the library (whose window
    is a fixed 5 minutes): a receiver sharing a test's stepped clock must not refuse a request
    signed just before the step. The signature is still the library's.

    Raises:
        WebhookVerificationError: a missing header, a timestamp out of tolerance or no
            matching signature.
        ValueError: a malformed header.
    """
    if tolerance_s is None:
        webhook.verify(body, headers, json_parse=False)
        return
    lowered = {k.lower(): v for k, v in headers.items()}
    msg_id, stamp = lowered.get("webhook-id"), lowered.get("webhook-timestamp")
    signatures = lowered.get("webhook-signature")
    if not (msg_id and stamp and signatures):
        raise WebhookVerificationError("Missing required headers")
    if abs(time.time() - int(stamp)) > tolerance_s:
        raise WebhookVerificationError(f"Message timestamp more than {tolerance_s} s away")
    expected = webhook.sign(msg_id, datetime.fromtimestamp(int(stamp), tz=UTC),
                            body.decode()).split(",", 1)[1]
    if not any(hmac.compare_digest(expected, sig.split(",", 1)[1])
               for sig in signatures.split(" ") if sig.startswith("v1,")):
        raise WebhookVerificationError("No matching signature found")


def _parse_args(argv: list[str] | None) -> ReceiverConfig:
    parser = argparse.ArgumentParser(
        prog="hookline receiver",
        description="Play local webhook destinations that verify, record and misbehave.")
    parser.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT",
                        help="address to bind; port 0 picks one (default: %(default)s)")
    parser.add_argument("--endpoint", action="append", required=True,
                        metavar="NAME=SECRET[:BEHAVIOUR]",
                        help="serve POST /NAME (repeatable); behaviours: ok, fail:N, "
                             "status:CODE, retry_after:S, gone, redirect:URL, slow:S, "
                             "slow_first:S, trickle:S, hang, drop_first")
    parser.add_argument("--log", type=Path, metavar="FILE",
                        help="append every request and effect to FILE as JSON lines")
    parser.add_argument("--timestamp-tolerance-s", type=float, metavar="S",
                        help="accept a webhook-timestamp up to S seconds from this host's clock "
                             "(default: the standard's 300)")
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        parser.error(f"bad --listen {args.listen!r}; expected HOST:PORT")
    try:
        endpoints = tuple(parse_endpoint(spec) for spec in args.endpoint)
        Receiver(endpoints)  # validate names and secrets before binding anything
    except ConfigError as exc:
        parser.error(str(exc))
    return ReceiverConfig(host=host, port=int(port), endpoints=endpoints, requests_log=args.log,
                          timestamp_tolerance_s=args.timestamp_tolerance_s)


def main(argv: list[str] | None = None) -> int:
    """Run the receiver until SIGTERM/SIGINT (also reachable as `hookline receiver`).

    `--listen HOST:PORT --endpoint NAME=SECRET[:BEHAVIOUR] [--endpoint ...] [--log FILE]`.
    Stdout gets one line `{"event": "receiver_listening", "port": N}` once listening and the
    summary JSON on exit; logs go to stderr.

    Args:
        argv: arguments without the program name; `sys.argv[1:]` when None.

    Returns:
        The exit code: 0 after a signalled stop (argparse exits 2 on bad arguments).
    """
    config = _parse_args(argv)
    configure_logging("receiver", stream=sys.stderr)  # CLI only; stdout has machine lines

    def announce(port: int) -> None:
        print(json.dumps({"event": "receiver_listening", "port": port}), flush=True)

    summary = asyncio.run(run(config, on_listening=announce))
    print(json.dumps(summary, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
