"""What `hookline serve --check` verifies beyond the database: settings that would leave the
service refusing every request, that no other supervisor holds this service's locks, the
runtime paths and listen address it needs, and (with tracing on) the `OTEL_BSP_*` variables
every process reads at start."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hookline.shared.config import Config, shared_port_problem
from hookline.shared.errors import ConfigError
from hookline.shared.process.lifecycle import pid_file, runtime_dir
from hookline.shared.process.listen_check import unbindable
from hookline.shared.process.service_lock import held_service_locks
from hookline.shared.tracing import batch_settings

_TOKENS = {
    "ingest_token": "POST /v1/events would refuse every event",
    "admin_token": "the admin API, /metrics and the dashboard would refuse every request",
}


def service_problems(config: Config) -> list[str]:
    """Each reason `hookline serve` would start but not work as meant, as one sentence
    naming the setting to change; empty when there is none. Binds the listen address for
    a moment (released at once). A service lock held by another `hookline serve`
    (:mod:`hookline.shared.process.service_lock`) is a problem, as `serve` would be refused; but
    that lock, and an address in use, while held by the supervisor named by the pid file, are
    reported on stderr, not as problems (a check before a restart)."""
    problems = [f"{name} is not set: {effect} (set {name} in the config file, "
                f"HOOKLINE_{name.upper()} or {name}_file)"
                for name, effect in _TOKENS.items() if getattr(config, name) is None]
    running = _running_supervisor(pid_file(config))
    for lock, what, holder in held_service_locks(config):
        runs = (f"{holder.describe()} holds {what}" if holder.command is not None
                else f"another hookline serve runs on {what}: {holder.describe()}")
        refusal = f"lock held: {runs} (lock {lock}), so `hookline serve` would be refused now"
        if holder.pid is not None and holder.pid == running:
            print(f"{refusal} (the running service, as named by {pid_file(config)}: not "
                  "counted)", file=sys.stderr)
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
        if running is None:
            problems.append(f"listen: cannot listen on {config.listen}: {reason}")
        else:  # checking a new configuration before restarting the running service
            print(f"listen address {config.listen} is in use, presumably by the running "
                  f"service (supervisor pid {running} in {pid_file(config)}): not checked",
                  file=sys.stderr)
    return problems


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
