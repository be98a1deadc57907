"""hookline's configuration: one frozen dataclass, loaded once per process.

Precedence, highest first: command-line flag > `HOOKLINE_<NAME>` environment variable >
config file (TOML, top-level keys named like the fields) > the defaults below. Only the CLI
reads the environment; every other module receives a :class:`Config`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookline.shared import config_checks as checks
from hookline.shared.config_checks import listen_host_port
from hookline.shared.db_url import redact_url, sqlite_path
from hookline.shared.errors import ConfigError, InvalidSetting
from hookline.shared.policy.netguard import AddressPolicy
from hookline.shared.policy.rules import (
    CONFIG_RETENTION_FIELDS,
    DEFAULT_BODIES_AGE,
    DEFAULT_DEDUPE_AGE,
    DEFAULT_METADATA_AGE,
    retention_ages,
)
from hookline.shared.timeparse import parse_duration
from hookline.shared.tracing import check_tracing_setting

ENV_PREFIX = "HOOKLINE_"
CONFIG_ENV = "HOOKLINE_CONFIG_JSON"
"""How the supervisor hands a child its whole Config (secrets included): in the environment,
which only the same user can read (/proc/PID/environ), never on the command line, which
every local user can (ps)."""
CONFIG_FILE_ENV = "HOOKLINE_CONFIG"
"""The config file (TOML) when no --config flag is given."""
OTHER_ENV_NAMES = frozenset({
    CONFIG_FILE_ENV, CONFIG_ENV,
    "HOOKLINE_PG_BIN",  # where rehearsals and tests find PostgreSQL's server binaries
})
"""`HOOKLINE_*` variables that are not settings but are read by hookline on purpose."""
_SECRET_FIELDS = frozenset({"admin_token", "ingest_token"})
# Secrets that may also come from a file: `<name>_file`, or systemd's credentials folder
# ($CREDENTIALS_DIRECTORY/<name>, set by LoadCredential= in the unit).
_SECRET_FILE_FIELDS = {"admin_token": "admin_token_file", "ingest_token": "ingest_token_file"}
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _opt(default: Any, doc: str, check: checks.Check | None = None) -> Any:
    """A Config field: its default, its one-line description and its rule, side by side."""
    return field(default=default, metadata={"doc": doc, "check": check})


def _database(name: str, value: Any) -> None:
    # Refuses :memory: and other databases private to one process; its StorageRefused names
    # the database and says what to use instead.
    sqlite_path(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """Every setting of a hookline process. Units are in the names (`_s` = seconds)."""

    db: str = _opt("hookline.db", "Database: a SQLite file path or sqlite:///PATH, or a "
                                  "postgresql:// URL (many hosts).",
        check=_database)
    listen: str = _opt("127.0.0.1:8080", "Ingest listen address, HOST:PORT.",
        check=checks.as_setting(listen_host_port))
    workers: int = _opt(2, "Number of worker processes `hookline serve` starts.",
        check=checks.at_least(0))
    ingest_processes: int = _opt(
        1, "Ingest processes `hookline serve` starts, all listening on `listen`'s port "
        "(SO_REUSEPORT: the kernel spreads new connections over them); each takes, validates "
        "and commits its own requests. More than one pays off only where a core is free for "
        "it (docs/benchmarks.md); it needs a fixed port, not 0.",
        check=checks.at_least(1))
    ingest_writer: str = _opt(
        "thread", "Where ingest's group commits run on SQLite: `thread` (each ingest "
        "process commits its own events on a database thread beside its event loop) or "
        "`process` (one writer process, `ingest-writer`, commits every ingest process's "
        "batches; the HTTP side then has a core's worth of time for requests: about 50 % "
        "more events/s flat out, some more CPU per event at everyday rates; "
        "docs/benchmarks.md). A 2xx still follows the commit. "
        "PostgreSQL ignores it (each ingest process writes itself).",
        check=checks.one_of("thread", "process"))
    synchronous: str = _opt(
        "FULL", "SQLite synchronous mode of every commit but the workers' "
        "(worker_synchronous): FULL (an answered event survives power loss) or NORMAL "
        "(faster; the last commits may be lost on power loss, never on a crash).",
        check=checks.one_of("FULL", "NORMAL"))
    worker_synchronous: str = _opt(
        "NORMAL", "SQLite synchronous mode of the workers' commits (claims, attempts, "
        "finishes), on which no caller waits: NORMAL (default; a power loss can undo the last "
        "ones, and those deliveries are sent again: at least once) or FULL.",
        check=checks.one_of("FULL", "NORMAL"))
    busy_timeout_s: float = _opt(5.0, "How long a SQLite statement waits for the write lock.",
        check=checks.above_zero)
    allow_network_filesystem: bool = _opt(
        False, "Accept a SQLite database whose folder is on a network or FUSE filesystem "
        "(nfs, cifs, 9p, virtiofs, sshfs, ...), where WAL's shared memory is unsafe; refused "
        "by default.")
    quick_check_timeout_s: float = _opt(
        30.0, "`hookline serve` runs PRAGMA quick_check on the SQLite file before starting "
        "and refuses a damaged one; past this many seconds it stops checking, logs "
        "quick_check_incomplete and starts. 0 = skip the check.",
        check=checks.finite_or_zero("skip the check"))
    # PostgreSQL: every wait on the server is bounded (OPERATIONS.md, "PostgreSQL for many
    # hosts"); SQLite ignores these.
    pg_connect_timeout_s: float = _opt(
        5.0, "PostgreSQL: longest time opening one connection may take, seconds.",
        check=checks.above_zero)
    pg_acquire_timeout_s: float = _opt(
        5.0, "PostgreSQL: longest wait for a pooled connection (opening one included), "
        "seconds.",
        check=checks.above_zero)
    pg_transaction_timeout_s: float = _opt(
        15.0, "PostgreSQL: longest time one store transaction may take, from acquiring a "
        "connection to its commit, seconds; past it the connection is closed (never reused) "
        "and the call fails as an outage (retried).",
        check=checks.above_zero)
    pg_statement_timeout_s: float = _opt(
        10.0, "PostgreSQL: the server's statement_timeout for hookline's sessions, seconds "
        "(0 = none).",
        check=checks.finite_or_zero("none"))
    pg_idle_in_transaction_timeout_s: float = _opt(
        10.0, "PostgreSQL: the server's idle_in_transaction_session_timeout: it ends a "
        "session whose transaction waits this long for its client, releasing its row locks, "
        "so a host cut off mid-transaction blocks others for at most pg_statement_timeout_s "
        "+ this, seconds (0 = none: a lost host's locks may stay for hours).",
        check=checks.finite_or_zero("none"))
    pg_lock_timeout_s: float = _opt(
        5.0, "PostgreSQL: the server's lock_timeout: a statement waiting this long for a "
        "row lock fails and is retried, seconds (0 = none).",
        check=checks.finite_or_zero("none"))
    pg_keepalives_idle_s: float = _opt(
        10.0, "PostgreSQL: TCP keepalive on both ends of each connection: probe an idle "
        "connection after this long, seconds.",
        check=checks.finite_or_zero("none"))
    pg_keepalives_interval_s: float = _opt(
        5.0, "PostgreSQL: TCP keepalive: seconds between two probes.",
        check=checks.above_zero)
    pg_keepalives_count: int = _opt(
        3, "PostgreSQL: TCP keepalive: unanswered probes before the connection is dead.",
        check=checks.above_zero)
    pg_tcp_user_timeout_s: float = _opt(
        20.0, "PostgreSQL: TCP_USER_TIMEOUT on both ends (the server's from PostgreSQL 12): "
        "data unacknowledged this long kills the connection, seconds (0 = system default).",
        check=checks.finite_or_zero("system default"))
    ingest_commit_timeout_s: float = _opt(
        5.0, "Ingest: longest time an event waits for its commit, seconds; past it the answer "
        "is 503 store_unavailable with Retry-After (the commit's outcome may be unknown: the "
        "client sends the event again with the same id, and a stored one is answered as a "
        "duplicate).",
        check=checks.above_zero)
    lease_s: float = _opt(30.0, "Lease length of a claim; extended while a request is in flight.",
        check=checks.above_zero)
    attempt_timeout_s: float = _opt(
        10.0, "Total time one attempt may take (connect, send, read); must be below lease_s.",
        check=checks.above_zero)
    max_attempts: int = _opt(18, "Attempts per job before it is dead (the attempt cap).",
        check=checks.at_least(1))
    retry_base_s: float = _opt(10.0, "Backoff: wait before the 2nd attempt (doubles each time).",
        check=checks.above_zero)
    retry_cap_s: float = _opt(8 * 3600.0, "Backoff: longest single wait between attempts.",
        check=checks.above_zero)
    poll_interval_s: float = _opt(
        1.0, "Idle workers look for due jobs this often when no wake-up arrives.",
        check=checks.above_zero)
    worker_concurrency: int = _opt(64, "Most requests one worker process has in flight.",
        check=checks.at_least(1))
    max_connection_age_s: float = _opt(
        30.0, "A keep-alive connection to a destination older than this, seconds, is closed "
        "instead of reused, so a destination whose DNS name moved is followed within "
        "max_connection_age_s + min(10, max_connection_age_s) (the DNS cache).",
        check=checks.above_zero)
    destination_slot_share: float = _opt(
        0.5, "Most of a worker's slots (fraction of worker_concurrency, rounded up, at least "
        "1) that one destination may hold, whatever its max_in_flight, so a hanging "
        "destination cannot take every slot.",
        check=checks.share)
    tenant_slot_share: float = _opt(
        0.5, "Most of a worker's slots (fraction of worker_concurrency, rounded up, at least "
        "1) that one tenant's destinations may hold together while destinations of more than "
        "one tenant exist, so one tenant's backlog or hanging endpoints cannot take another "
        "tenant's slots.",
        check=checks.share)
    claim_batch: int = _opt(64, "Most jobs one claim takes (claims are also sized to free slots).",
        check=checks.at_least(1))
    batch_interval_s: float = _opt(
        0.015, "Under a trickle, least time between two write transactions of one kind "
        "in one process (ingest commits, worker claims, worker finishes), seconds: each "
        "commit then carries several items, so the database's write lock is taken, and a "
        "transaction's fixed cost paid, less often. Adds at most this much latency to "
        "ingest's commit and as much to the worker's claim; 16 items waiting, or an "
        "idle service, write at once (a worker's "
        "results still wait up to 50 ms to share the next claim's write, the job shown "
        "running meanwhile), and a result a destination's next job waits for is written "
        "within 2 ms. 0 = off, that wait included.",
        check=checks.between_zero_and_one)
    graceful_timeout_s: float = _opt(
        10.0, "On stop, how long in-flight sends may finish before they are handed back.")
    max_body_bytes: int = _opt(1024 * 1024, "Largest event body ingest accepts.")
    log_level: str = _opt("info", "Minimum log level: debug, info, warning, error.",
        check=checks.one_of("debug", "info", "warning", "error"))
    admin_token: str | None = _opt(
        None, "Bearer token the admin API, /metrics and the dashboard's data require (secret). "
        "Unset: the admin API refuses every request.",
        check=checks.not_blank)
    admin_token_file: str | None = _opt(
        None, "Read admin_token from this file (e.g. a systemd credential).")
    ingest_token: str | None = _opt(
        None, "Bearer token POST /v1/events requires (secret). Unset: /v1/events refuses every "
        "request; provider sources (/v1/sources/NAME) use their own signatures.",
        check=checks.not_blank)
    ingest_token_file: str | None = _opt(
        None, "Read ingest_token from this file (e.g. a systemd credential).")
    ingest_closed: bool = _opt(
        False, "POST /v1/events is closed on purpose (no ingest_token: events come only "
        "through provider sources, or none at all); without it or an ingest_token the "
        "service is not ready (/readyz 503, no READY=1).")
    allow_networks: str = _opt(
        "", "SSRF guard: comma-separated CIDRs and host names destinations may reach although "
        "they are not global (e.g. 127.0.0.0/8 for a local receiver, 10.0.0.0/8).",
        check=checks.as_setting(AddressPolicy.parse))
    https_only: bool = _opt(False, "Refuse destinations whose URL is not https://.")
    tenants_auto_create: bool = _opt(
        False, "POST /v1/events for a tenant that does not exist creates it (with defaults) "
        "instead of answering 404 tenant_not_found.")
    portal_frame_ancestors: str = _opt(
        "", "Origins allowed to embed the customer portal (/portal/) in a frame, separated by "
        "commas (e.g. https://app.example.com); sent as CSP frame-ancestors. Empty: no site "
        "may frame it. The dashboard refuses every frame regardless.",
        check=checks.as_setting(checks.frame_ancestors))
    portal_owner_name: str = _opt(
        "the service that sent you here", "Who the customer portal names as the one to "
        "ask for a new link once a tenant token has expired (e.g. your product's name).",
        check=checks.not_blank)
    max_header_bytes: int = _opt(
        8190, "Ingest: longest accepted request header field (name + value), bytes; a longer "
        "one is answered 431 before any handler runs.",
        check=checks.at_least(1))
    max_headers: int = _opt(
        100, "Ingest: most request header fields accepted on one request; more is answered "
        "431 before any handler runs.",
        check=checks.at_least(1))
    ingest_rate_per_s: float = _opt(
        0.0, "Ingest: events per second accepted per source of each tenant (token bucket, "
        "refilled continuously); over it, 429 with Retry-After. 0 = no limit (the default). "
        "Each ingest process keeps its own buckets (ingest_processes).",
        check=checks.finite_or_zero("off"))
    ingest_burst: int = _opt(
        100, "Ingest: events a source may send at once above ingest_rate_per_s (the bucket "
        "size); used only when ingest_rate_per_s > 0.",
        check=checks.at_least(1))
    retention_interval_s: float = _opt(
        3600.0, "How often ingest runs the retention purge; 0 turns it off (seconds).")
    retention_bodies_s: float = _opt(
        parse_duration(DEFAULT_BODIES_AGE),
        "Retention: empty the bodies of finished events older than this (s).",
        check=checks.retention)
    retention_metadata_s: float = _opt(
        parse_duration(DEFAULT_METADATA_AGE),
        "Retention: delete finished jobs and attempts older than this (s).",
        check=checks.retention)
    retention_dedupe_s: float = _opt(
        parse_duration(DEFAULT_DEDUPE_AGE),
        "Retention: keep (source, id) dedupe keys at least this long (s).",
        check=checks.retention)
    retention_dead_letters_s: float | None = _opt(
        None, "Retention: delete dead jobs (dead letters) and their attempts once they died "
        "longer ago than this (s); their event bodies are kept while they are. Unset: the same "
        "as retention_metadata_s.",
        check=checks.retention)
    # Delivery policy (see OPERATIONS.md).
    permanent_statuses: str = _opt(
        "400,401,403,404,405,410,413,415,422",
        "Comma-separated 4xx statuses that make a job dead at once (others are retried).",
        check=checks.as_setting(checks.permanent_codes))
    breaker_failures: int = _opt(
        100, "Circuit breaker: auto-pause a destination after this many consecutive failed "
        "attempts (0 = off).",
        check=checks.not_negative("off"))
    breaker_min_span_s: float = _opt(
        300.0, "Circuit breaker: breaker_failures trips only once the failure run has lasted "
        "this long, seconds (a burst of failures does not).",
        check=checks.not_negative("none"))
    breaker_window_s: float = _opt(
        86400.0, "Circuit breaker: auto-pause a destination failing without a success for "
        "this long, seconds (0 = off).",
        check=checks.not_negative("off"))
    # Operational events (see OPERATIONS.md "Operational events").
    notify_failing_streak: int = _opt(
        5, "Operational events: hookline.destination.failing once a destination has failed "
        "this many consecutive attempts (0 = off).",
        check=checks.not_negative("off"))
    notify_failing_after_s: float = _opt(
        600.0, "Operational events: hookline.destination.failing at the first failed attempt "
        "once a destination has been failing without a success for this long, seconds "
        "(0 = off).",
        check=checks.not_negative("off"))
    notify_dead_letters_step: int = _opt(
        10, "Operational events: hookline.dead_letters.growing once this many jobs of a "
        "destination died since the last notice (0 = off).",
        check=checks.not_negative("off"))
    notify_dead_letters_interval_s: float = _opt(
        3600.0, "Operational events: at most one hookline.dead_letters.growing per destination "
        "in this many seconds.",
        check=checks.not_negative("none"))
    public_url: str | None = _opt(
        None, "hookline's public base URL (https://hooks.example.com): the links to the "
        "dashboard and the portal in operational events are absolute under it (unset: "
        "paths only).",
        check=checks.base_url)
    late_retry_after_attempts: int = _opt(
        3, "A job that already made this many attempts is a late retry (reserved capacity).",
        check=checks.at_least(1))
    late_retry_share: float = _opt(
        0.5, "Most of a worker's slots (fraction of worker_concurrency, at least 1) that late "
        "retries may hold; the rest is kept for first attempts and early retries.",
        check=checks.share)
    maintenance_interval_s: float = _opt(
        30.0, "How often ingest checkpoints the SQLite WAL so the -wal file stays bounded "
        "(and, on PostgreSQL, folds the appended metric deltas).",
        check=checks.above_zero)
    metrics_destination_series_max: int = _opt(
        100, "GET /metrics: at most this many destinations get series of their own (paused, "
        "failing, with the oldest due job first); the rest are added up under "
        "destination=\"_other\".",
        check=checks.not_negative("every destination folded"))
    wal_degraded_bytes: int = _opt(
        256 * 1024 * 1024, "GET /healthz reports degraded while the SQLite -wal file stays "
        "larger than this after a checkpoint, bytes (a reader holds it open; 0 = off).",
        check=checks.not_negative("off"))
    # Supervisor for production (see OPERATIONS.md "Running under systemd").
    heartbeat_timeout_s: float = _opt(
        30.0, "A child whose event loop has not heartbeated for this long, seconds, is hung: "
        "it gets SIGABRT, then SIGKILL, and is replaced.",
        check=checks.above_zero)
    runtime_dir: str | None = _opt(
        None, "Folder for heartbeat files and the supervisor's status.json (default: DB.run "
        "beside a SQLite database, ./hookline.run with PostgreSQL; under systemd "
        "/run/hookline, from RuntimeDirectory=hookline).")
    pid_file: str | None = _opt(
        None, "File holding the supervisor's pid, for `hookline scale` (default: DB.pid "
        "beside a SQLite database, ./hookline.pid with PostgreSQL; under systemd "
        "/run/hookline/hookline.pid).")
    log_file: str | None = _opt(
        None, "Also append the JSON log lines to this file (rotated by the supervisor).")
    log_file_max_bytes: int = _opt(
        10 * 1024 * 1024, "The supervisor rotates log_file once it grows past this, bytes.",
        check=checks.above_zero)
    log_file_backups: int = _opt(5, "Rotated log files kept (LOG.1 ... LOG.N).")
    tracing: bool = _opt(
        False, "Export OpenTelemetry traces (OTLP/HTTP) of each event from the publisher's "
        "request to every delivery attempt; the collector, sampling and batching come from "
        "the standard OTEL_* variables (OPERATIONS.md, \"Tracing\"). Needs "
        "`pip install 'hookline[otel]'`.",
        check=check_tracing_setting)

    def __post_init__(self) -> None:
        """Apply each field's rule (declared beside it), then the rules between fields.

        Raises:
            InvalidSetting: naming the first setting, in declaration order, that breaks its
                rule (or, for a rule between fields, the one to change).
        """
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata["check"] is not None and value is not None:
                f.metadata["check"](f.name, value)
        for rule in _BETWEEN_FIELDS:
            rule(self)

    @property
    def permanent_status_set(self) -> frozenset[int]:
        """:attr:`permanent_statuses` parsed (checked when the Config was built)."""
        return checks.permanent_codes(self.permanent_statuses)

    @property
    def address_policy(self) -> AddressPolicy:
        """The SSRF guard's policy (:mod:`hookline.shared.policy.netguard`) from `allow_networks`
        and `https_only`. Raises ConfigError for a malformed allow-list entry."""
        return AddressPolicy.parse(self.allow_networks, https_only=self.https_only)

    @classmethod
    def load(cls, *, flags: Mapping[str, Any] | None = None,
             env: Mapping[str, str] | None = None, file: str | Path | None = None) -> Config:
        """Merge the sources in precedence order and validate.

        Args:
            flags: values given on the command line; None values are ignored.
            env: the environment (only `HOOKLINE_*` keys and `CREDENTIALS_DIRECTORY` are
                read).
            file: a TOML file; its top-level keys are field names.

        A secret (`admin_token`, `ingest_token`) not given directly is read from its
        `<name>_file` setting, else from `$CREDENTIALS_DIRECTORY/<name>` when that file
        exists (systemd `LoadCredential=`); surrounding whitespace is stripped.

        Raises:
            ConfigError: unknown key, unreadable file, wrong type or invalid value.
        """
        values: dict[str, Any] = {}
        if file is not None:
            values.update(_read_toml(Path(file)))
        for f in dataclasses.fields(cls):
            raw = (env or {}).get(ENV_PREFIX + f.name.upper())
            if raw is not None:
                values[f.name] = raw
        values.update({k: v for k, v in (flags or {}).items() if v is not None})
        for name, file_field in _SECRET_FILE_FIELDS.items():
            if values.get(name) is None:
                values[name] = _read_secret(name, values.get(file_field),
                                            (env or {}).get("CREDENTIALS_DIRECTORY"))
        return cls(**{k: _coerce(k, v) for k, v in values.items()})

    def to_json(self) -> str:
        """Serialise every field (secrets included: for passing to child processes only)."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def for_child(cls, config_json: str | None, env: Mapping[str, str]) -> Config:
        """A child process's Config: `config_json` (a --config-json argument, for tests and
        manual runs) or else the CONFIG_ENV variable the supervisor set.

        Raises:
            ConfigError: neither is given, or the JSON is not a valid Config.
        """
        text = config_json if config_json is not None else env.get(CONFIG_ENV)
        if text is None:
            raise ConfigError(f"no configuration: pass --config-json or set {CONFIG_ENV}")
        try:
            return cls.from_json(text)
        except (ValueError, TypeError, AttributeError) as exc:  # not JSON / not an object
            raise ConfigError(f"invalid configuration JSON: {exc}") from exc

    @classmethod
    def from_json(cls, text: str) -> Config:
        """Inverse of :meth:`to_json`. Raises ConfigError on unknown or invalid fields."""
        return cls(**{k: _coerce(k, v) for k, v in json.loads(text).items()})

    def redacted(self) -> dict[str, Any]:
        """Every field, with secrets replaced by `***` (for `hookline config show`)."""
        out = dataclasses.asdict(self)
        for name in _SECRET_FIELDS:
            if out[name] is not None:
                out[name] = "***"
        out["db"] = redact_url(self.db)  # a PostgreSQL URL may hold a password
        return out

    @staticmethod
    def docs() -> dict[str, str]:
        """Field name -> one-line description, for --help texts."""
        return {f.name: f.metadata["doc"] for f in dataclasses.fields(Config)}


def _attempt_within_lease(config: Config) -> None:
    if config.attempt_timeout_s >= config.lease_s:
        raise InvalidSetting("attempt_timeout_s", f"({config.attempt_timeout_s}) must be below "
                                                  f"lease_s ({config.lease_s}), or a slow "
                                                  "request could outlive its lease")


def _retention_order(config: Config) -> None:
    retention_ages(config.retention_bodies_s, config.retention_metadata_s,
                   config.retention_dedupe_s, fields=CONFIG_RETENTION_FIELDS)


def _ingest_closed_or_token(config: Config) -> None:
    if config.ingest_closed and config.ingest_token is not None:
        raise InvalidSetting("ingest_closed", "true and an ingest_token are both set: unset "
                                              "one (ingest_closed says POST /v1/events is "
                                              "closed on purpose)")


_BETWEEN_FIELDS: tuple[Callable[[Config], None], ...] = (
    _attempt_within_lease, _retention_order, _ingest_closed_or_token)
"""The rules that relate two settings, applied after every field's own rule."""


def ingest_not_ready_reason(config: Config) -> str | None:
    """Why the service cannot count as ready whatever its processes do, or None.

    Ready means able to serve: POST /v1/events needs an `ingest_token`, unless the operator
    said that it is closed on purpose (`ingest_closed`). Checked by ingest's `/readyz` and by
    the supervisor before systemd's `READY=1`.
    """
    if config.ingest_token is None and not config.ingest_closed:
        return ("no ingest_token is set, so POST /v1/events refuses every event: set "
                "ingest_token (HOOKLINE_INGEST_TOKEN or ingest_token_file), or ingest_closed = "
                "true (HOOKLINE_INGEST_CLOSED=1) if it is closed on purpose")
    return None


def shared_port_problem(config: Config) -> str | None:
    """Why `config.ingest_processes` ingest processes cannot share `config.listen` (port 0
    would give each a port of its own), as a sentence naming the settings; None when they
    can."""
    if config.ingest_processes > 1 and listen_host_port(config.listen)[1] == 0:
        return (f"ingest_processes = {config.ingest_processes} needs a fixed port in listen "
                f"({config.listen!r}): port 0 would give each ingest process a port of its own")
    return None


def setting_env_names() -> frozenset[str]:
    """`HOOKLINE_<FIELD>` for every Config field: the variables that set a setting."""
    return frozenset(ENV_PREFIX + f.name.upper() for f in dataclasses.fields(Config))


def unknown_env_warnings(env: Mapping[str, str]) -> list[str]:
    """One sentence per `HOOKLINE_*` variable in `env` that hookline does not read (a typo
    would otherwise silently leave a setting at its default), naming the closest known
    name when there is a close one; sorted by variable name."""
    known = setting_env_names() | OTHER_ENV_NAMES
    warnings = []
    for name in sorted(k for k in env if k.startswith(ENV_PREFIX) and k not in known):
        # Compared without the shared prefix, which would make every name look close.
        suffixes = sorted(k.removeprefix(ENV_PREFIX) for k in known)
        close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), suffixes, n=1,
                                          cutoff=0.6)
        hint = (f"did you mean {ENV_PREFIX}{close[0]}?" if close
                else "`hookline --help` lists the settings")
        warnings.append(f"unknown environment variable {name} is ignored ({hint})")
    return warnings


def _read_secret(name: str, path: str | None, credentials_dir: str | None) -> str | None:
    """The secret `name` from `path`, else from systemd's credentials folder, else None."""
    if path is None and credentials_dir:
        candidate = Path(credentials_dir) / name
        path = str(candidate) if candidate.is_file() else None
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {name} from {path}: {exc}") from exc
    if not text:
        raise ConfigError(f"{name} file {path} is empty")
    return text


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc


_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(Config)}


def _coerce(name: str, value: Any) -> Any:
    if name not in _FIELD_TYPES:
        raise ConfigError(f"unknown setting {name!r}")
    kind = str(_FIELD_TYPES[name])
    try:
        if value is None:
            return None
        if kind.startswith("bool"):
            return _coerce_bool(name, value)
        if kind.startswith("int"):
            return int(value)
        if kind.startswith("float"):
            return float(value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} must be {kind.split(' ')[0]}, not {value!r}") from exc


def _coerce_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, not {value!r}")
