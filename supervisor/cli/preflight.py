"""What `hookline serve --check` verifies beyond the database: settings that would leave the
service refusing every request, that no other supervisor holds this service's locks, the
runtime paths and listen address it needs, and (with tracing on) the `OTEL_BSP_*` variables
every process reads at start."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hookline.shared.config import Config, shared_port_problem
from hookline.shared.config_checks import listen_host_port
from hookline.shared.errors import ConfigError
from hookline.shared.process.lifecycle import pid_file, runtime_dir
from hookline.shared.process.listen_check import unbindable
from hookline.shared.process.service_lock import ServiceLocked, held_service_locks
from hookline.shared.tracing import batch_settings

_TOKENS = {
    "ingest_token": "POST /v1/events would refuse every event",
    "admin_token": "the admin API, /metrics and the dashboard would refuse every request",
}
_EVERY_ADDRESS = frozenset({"0.0.0.0", "::"})  # a listener here holds its port on every address


def service_problems(config: Config) -> list[str]:
    """Each reason `hookline serve` would start but not work as meant, as one sentence
    naming the setting to change; empty when there is none. Binds the listen address for
    a moment (released at once). A service lock held by another `hookline serve`
    (:mod:`hookline.shared.process.service_lock`) is a problem, as `serve` would be refused (in
    serve's words); but that lock, while held by the supervisor named by the pid file, is
    reported on stderr, not as a problem (a check before a restart), and so is an address in
    use that this supervisor's lock file says it listens on."""
    problems = [f"{name} is not set: {effect} (set {name} in the config file, "
                f"HOOKLINE_{name.upper()} or {name}_file)"
                for name, effect in _TOKENS.items() if getattr(config, name) is None]
    running = _running_supervisor(pid_file(config))
    running_listen = None  # where the running supervisor listens, as its lock file says
    for lock, what, holder in held_service_locks(config):
        refusal = ("lock held, so `hookline serve` would be refused now: "
                   f"{ServiceLocked(lock, holder, what)}")
        if holder.pid is not None and holder.pid == running:
            running_listen = holder.listen
            print(f"{refusal} (the running service, as named by {pid_file(config)}: not "
                  "counted, as in a check before restarting it)", file=sys.stderr)
        else:
            problems.append(refusal)
    for label, path in (("runtime_dir", runtime_dir(config)),
                        ("pid_file", pid_file(config).parent)):
        if (reason := _unwritable(path)) is not None:
            problems.append(f"{label}: cannot write {path}: {reason} (set {label} to a "
                            "writable place, e.g. /run/hookline under systemd's "
                            "RuntimeDirectory=hookline)")
    if config.tracing:  # every process reads these at start, and stops on a bad one
        try:
            batch_settings()
        except ConfigError as exc:
            problems.append(f"tracing: {exc} (every process would stop at start)")
    if (reason := shared_port_problem(config)) is not None:
        problems.append(reason)
    if (reason := unbindable(config.listen)) is not None:
        if running_listen is not None and _same_address(running_listen, config.listen):
            # checking a new configuration before restarting the service that listens there
            print(f"listen address {config.listen} is in use, presumably by the running "
                  f"service (supervisor pid {running} in {pid_file(config)}, listening on "
                  f"{running_listen}): not checked", file=sys.stderr)
        else:  # another process holds it, which restarting the running service would not free
            elsewhere = ("" if running_listen is None else
                         f"; the running service (supervisor pid {running} in "
                         f"{pid_file(config)}) listens on {running_listen}, not there")
            problems.append(f"listen: cannot listen on {config.listen}: {reason}{elsewhere}")
    return problems


def _same_address(running: str, checked: str) -> bool:
    """Whether a service listening on `running` holds `checked` (both HOST:PORT): the same
    port, on the same host or with either on every address of this host."""
    try:
        running_host, running_port = listen_host_port(running)
    except ConfigError:  # an unreadable record (it is written from a checked setting)
        return False
    host, port = listen_host_port(checked)
    return port == running_port and (
        host == running_host or bool({host, running_host} & _EVERY_ADDRESS))


def _running_supervisor(path: Path) -> int | None:
    """The pid in the supervisor's pid file when that process is alive, else None."""
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except PermissionError:  # alive, under another user
        return pid
    except (OSError, ValueError):
        return None
    return pid


def _unwritable(folder: Path) -> str | None:
    """Why files cannot be created in `folder` (or in the nearest existing folder above it,
    which `serve` would create it in), or None when they can."""
    existing = folder.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable by this user"
    return None
