"""The arbiter: one synchronous loop that keeps a set of child processes running.

Generic over what the children run: each child is a :class:`ChildSpec` holding a slot name and
a full argv. The loop follows the design of gunicorn's arbiter:

* signal handlers only queue the signal number; a self-pipe registered with
  :func:`signal.set_wakeup_fd` wakes the loop, which dispatches to ``handle_<name>``
  (supervisor/signal_pipe.py);
* children are reaped with ``waitpid(-1, WNOHANG)`` and respawned after a capped exponential
  backoff per slot (gunicorn respawns at once; a crash loop then burns a CPU);
* a child exiting with :data:`hookline.shared.process.lifecycle.BOOT_ERROR_EXIT` is misconfigured
  for good, so the whole service stops with that code rather than respawning it forever; every other
  exit (:data:`hookline.shared.process.lifecycle.TRANSIENT_EXIT`: the database was away; 1: a crash)
  is respawned;
* a child is started later in life (a respawn, a scale-up) only while the code on disk is the
  one the service started with (``code_changed``): after an upgrade under a running service the
  whole service stops instead, with exit 75 for systemd to start it again on the new code;
* ``READY=1`` goes to systemd once every initial slot has reported ready
  (supervisor/readiness.py), not merely been spawned, and never while the service cannot
  serve (``not_ready_reason``, e.g. no ingest token);
* graceful stop: SIGTERM to every child, reap every 0.1 s until ``graceful_timeout_s``, then
  SIGKILL what is left.

Worker slots are named ``worker-<n>`` (n >= 1); SIGTTIN adds the lowest free number through
``make_worker_spec(n)`` and SIGTTOU retires the highest one. What a slot runs, how a child is
started and how worker slots are numbered: supervisor/children.py.

Liveness: a child whose spec names a ``heartbeat_file`` must touch it from its event loop
(:func:`hookline.shared.process.lifecycle.heartbeat`). The arbiter never compares that mtime with
the wall clock (which can be stepped): it notes, on its monotonic clock, when it last saw the mtime
change (starting at spawn); once that is more than ``heartbeat_timeout_s`` ago the child is hung: it
gets SIGABRT, then SIGKILL after ``abort_grace_s``, and is respawned. Wall-clock steps are
logged as ``clock_step`` (:mod:`hookline.shared.process.clock`).
systemd's ``WATCHDOG=1`` is sent only while every such child is fresh. The supervisor's view
(alive and healthy slots, stopping or not) is kept in ``status_file`` for ``GET /readyz`` and
``hookline scale`` (supervisor/status_report.py).
"""

from __future__ import annotations

import collections
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hookline.shared.logs import get_logger
from hookline.shared.process.clock import ClockStepDetector
from hookline.shared.process.lifecycle import BOOT_ERROR_EXIT, TRANSIENT_EXIT, write_status
from hookline.supervisor import sdnotify
from hookline.supervisor.child_exits import describe_exit, respawn_delay_s, returncode
from hookline.supervisor.children import (
    Child,
    ChildSpec,
    next_worker_number,
    start_child,
    worker_slots,
)
from hookline.supervisor.metrics import SupervisorMetrics
from hookline.supervisor.readiness import Readiness
from hookline.supervisor.signal_pipe import SignalPipe
from hookline.supervisor.status_report import status_line, status_view

_HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGTTIN, signal.SIGTTOU)
_REAP_INTERVAL_S = 0.1
# After SIGKILL a process normally dies at once; bound the wait for one stuck in the kernel
# (uninterruptible I/O) so `run()` still returns.
_KILL_REAP_TIMEOUT_S = 5.0
# Longest sleep of the main loop with no timer due: signals wake it earlier anyway.
_IDLE_WAKE_S = 1.0
# How often readiness markers are looked at until every initial slot has reported.
_READY_POLL_S = 0.05


class Arbiter:
    """Keep one OS process running per slot until told to stop.

    Use from the main thread only (signal handlers and `set_wakeup_fd` require it); `run()`
    blocks until the service stops.
    """

    def __init__(
        self,
        specs: Sequence[ChildSpec],
        *,
        graceful_timeout_s: float = 10.0,
        respawn_base_s: float = 0.5,
        respawn_cap_s: float = 30.0,
        stable_after_s: float = 10.0,
        make_worker_spec: Callable[[int], ChildSpec] | None = None,
        on_ready: Callable[[], None] | None = None,
        heartbeat_timeout_s: float | None = None,
        abort_grace_s: float = 1.0,
        status_file: str | Path | None = None,
        on_tick: Callable[[], None] | None = None,
        metrics_folder: Path | None = None,
        not_ready_reason: str | None = None,
        code_changed: Callable[[], str | None] | None = None,
    ) -> None:
        """Prepare the arbiter; nothing starts before :meth:`run`.

        Args:
            specs: one spec per slot, started in this order; slot names must be unique.
            graceful_timeout_s: time a child gets between SIGTERM and SIGKILL, in seconds.
            respawn_base_s: respawn delay after a first failure, in seconds.
            respawn_cap_s: longest respawn delay, in seconds.
            stable_after_s: a child that lived at least this long, in seconds, resets the
                failure count of its slot.
            make_worker_spec: builds the spec of worker number n (slot ``worker-<n>``) for
                SIGTTIN; None disables scaling up.
            on_ready: called once, when every initial slot has reported ready (its spec's
                ``ready_file``) or, without one, been started; systemd gets ``READY=1`` at
                the same moment.
            heartbeat_timeout_s: a child with a heartbeat file untouched for this long, in
                seconds, is hung and replaced; None disables the check.
            abort_grace_s: time between SIGABRT and SIGKILL for a hung child, in seconds.
            status_file: where to keep the JSON status (pid, stopping, slots with pid and
                health); None keeps none.
            on_tick: called from the main loop at least once a second (e.g. log rotation);
                an OSError it raises is logged, not fatal.
            metrics_folder: where the supervisor's /metrics snapshot goes (supervisor/metrics.py);
                None keeps none.
            not_ready_reason: why the service cannot be ready however its children do (e.g.
                no ingest token): ``READY=1`` is then never sent (nor ``on_ready`` called),
                the reason is logged as ``supervisor_not_ready`` and shown in ``STATUS=``.
            code_changed: asked before a child is started after the initial ones (a respawn,
                a scale-up); a text (what changed) means the code on disk is no longer the
                one the service started with: nothing is started and the whole service stops
                with :data:`TRANSIENT_EXIT` (supervisor/code_on_disk.py). None: never asked.

        Raises:
            ValueError: two specs share a slot name.
        """
        slots = [spec.slot for spec in specs]
        if len(set(slots)) != len(slots):
            raise ValueError(f"slot names must be unique, got {slots}")
        self._specs: dict[str, ChildSpec] = {spec.slot: spec for spec in specs}
        self._graceful_timeout_s = graceful_timeout_s
        self._respawn_base_s = respawn_base_s
        self._respawn_cap_s = respawn_cap_s
        self._stable_after_s = stable_after_s
        self._make_worker_spec = make_worker_spec
        self._on_ready = on_ready
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self._abort_grace_s = abort_grace_s
        self._status_file = Path(status_file) if status_file is not None else None
        self._on_tick = on_tick
        self._unhealthy: frozenset[str] = frozenset()
        self._clock_steps = ClockStepDetector()
        self._metrics = SupervisorMetrics(metrics_folder)
        self._not_ready_reason = not_ready_reason
        self._code_changed = code_changed

        self._children: dict[int, Child] = {}
        self._failures: dict[str, int] = collections.defaultdict(int)
        self._respawn_at: dict[str, float] = {}
        self._signals = SignalPipe(_HANDLED_SIGNALS)
        self._stopping = False
        self._exit_code = 0
        self._log = get_logger()
        self._watchdog_s: float | None = None
        self._watchdog_due = 0.0
        self._readiness = Readiness({}, done=True)  # replaced when the children start

    # ----------------------------------------------------------------- public API

    def run(self) -> int:
        """Start every child, supervise until stopped, then stop every child.

        Returns:
            0 after a graceful stop (SIGTERM or SIGINT); :data:`BOOT_ERROR_EXIT` when a child
            could not boot; :data:`TRANSIENT_EXIT` when the code on disk changed (see
            `code_changed`).
        """
        self._signals.install()
        try:
            self._watchdog_s = sdnotify.watchdog_interval_s()
            self._start_all()
            while not self._stopping:
                self._loop_once()
            self._stop_children()
        finally:
            # Never leave children behind, even when the loop itself failed.
            if self._children:
                self._stop_children()
            self._signals.restore()
        return self._exit_code

    def alive_slots(self) -> list[str]:
        """Return the slots that have a live process, in the order they were started."""
        return [child.slot for child in self._children.values()]

    # ------------------------------------------------------------ signal handlers
    # Called from the main loop by name, never from the signal handler itself.

    def handle_term(self) -> None:
        """SIGTERM: stop gracefully."""
        self._request_stop(reason="SIGTERM")

    def handle_int(self) -> None:
        """SIGINT: stop gracefully (Ctrl-C also reaches the children directly)."""
        self._request_stop(reason="SIGINT")

    def handle_chld(self) -> None:
        """SIGCHLD: reap every child that exited."""
        self._reap()

    def handle_ttin(self) -> None:
        """SIGTTIN: add one worker, numbered with the lowest free number."""
        if self._stopping:
            return
        if self._make_worker_spec is None:
            self._log.warning("supervisor_scaled", direction="up", refused="scaling disabled")
            return
        spec = self._make_worker_spec(next_worker_number([*self._specs, *self.alive_slots()]))
        if spec.slot in self._specs or spec.slot in self.alive_slots():
            self._log.error("supervisor_scaled", direction="up", slot=spec.slot,
                            refused="slot already in use")
            return
        self._specs[spec.slot] = spec
        self._log.info("supervisor_scaled", direction="up", slot=spec.slot,
                       workers=len(worker_slots(self._specs)))
        self._spawn(spec)

    def handle_ttou(self) -> None:
        """SIGTTOU: retire the highest-numbered worker gracefully; the last one stays."""
        if self._stopping:
            return
        workers = worker_slots(self._specs)
        if len(workers) <= 1:
            self._log.warning("supervisor_scaled", direction="down", workers=len(workers),
                              refused="at least one worker must remain")
            return
        slot = workers[-1]
        del self._specs[slot]
        self._respawn_at.pop(slot, None)
        self._failures.pop(slot, None)
        for pid, child in self._children.items():
            if child.slot == slot:
                child.retire_by = time.monotonic() + self._graceful_timeout_s
                self._send(pid, signal.SIGTERM)
        self._log.info("supervisor_scaled", direction="down", slot=slot, workers=len(workers) - 1)
        self._report_status()

    # ------------------------------------------------------------------ the loop

    def _loop_once(self) -> None:
        self._signals.sleep(self._next_timeout_s())
        self._dispatch_signals()
        if self._stopping:
            return
        now = time.monotonic()
        for slot, due in list(self._respawn_at.items()):
            if due <= now:
                del self._respawn_at[slot]
                self._spawn(self._specs[slot])
        self._kill_overdue_retirees(now)
        self._tick(now)

    def _next_timeout_s(self) -> float:
        deadlines = list(self._respawn_at.values())
        deadlines += [c.retire_by for c in self._children.values()
                      if c.retire_by is not None and not c.killed_by_supervisor]
        if self._watchdog_s is not None:
            deadlines.append(self._watchdog_due)
        if not self._readiness.done:
            deadlines.append(time.monotonic() + _READY_POLL_S)
        if not deadlines:
            return _IDLE_WAKE_S
        return max(0.0, min(min(deadlines) - time.monotonic(), _IDLE_WAKE_S))

    def _tick(self, now: float) -> None:
        """Periodic duties of both loops: liveness, systemd's watchdog, the `on_tick` hook."""
        if self._clock_steps.check() is not None:
            self._metrics.clock_stepped()
        if self._metrics.due(now):
            self._metrics.write(now, wanted=self._specs, alive=self.alive_slots(),
                                heartbeat_ages_s={c.slot: c.heartbeat.age_s(now)
                                                  for c in self._children.values()
                                                  if c.heartbeat is not None})
        if not self._stopping:
            self._check_heartbeats(now)
            self._check_ready()
        if self._watchdog_s is not None and now >= self._watchdog_due:
            # Fed only while every child is live: a hung child that we fail to replace
            # lets systemd's watchdog restart the whole service.
            if self._stopping or not self._unhealthy:
                sdnotify.notify("WATCHDOG=1")
            # Half the timeout, as sd_watchdog_enabled(3) recommends.
            self._watchdog_due = now + self._watchdog_s / 2
        if self._on_tick is not None:
            try:
                self._on_tick()
            except OSError as exc:
                self._log.warning("supervisor_tick_failed", error=str(exc))

    def _check_heartbeats(self, now: float) -> None:
        """SIGABRT a child whose heartbeat is stale, SIGKILL it `abort_grace_s` later."""
        if self._heartbeat_timeout_s is None:
            return
        unhealthy = set()
        for pid, child in self._children.items():
            if child.heartbeat is None or child.retire_by is not None:
                continue
            if child.aborted_at is not None:
                unhealthy.add(child.slot)
                if now - child.aborted_at >= self._abort_grace_s \
                        and not child.killed_by_supervisor:
                    child.killed_by_supervisor = True
                    self._log.warning("child_hung_killed", slot=child.slot, child_pid=pid)
                    self._send(pid, signal.SIGKILL)
                continue
            age_s = child.heartbeat.age_s(now)
            if age_s > self._heartbeat_timeout_s:
                unhealthy.add(child.slot)
                child.aborted_at = now
                self._log.error("child_hung", slot=child.slot, child_pid=pid,
                                heartbeat_age_s=round(age_s, 3),
                                heartbeat_timeout_s=self._heartbeat_timeout_s)
                # SIGABRT first: a live Python child dumps its stack (faulthandler) and dies.
                self._send(pid, signal.SIGABRT)
        if frozenset(unhealthy) != self._unhealthy:
            self._unhealthy = frozenset(unhealthy)
            self._write_status()

    def _dispatch_signals(self) -> None:
        while (signum := self._signals.pop()) is not None:
            name = signal.Signals(signum).name.removeprefix("SIG").lower()
            getattr(self, f"handle_{name}")()

    def _request_stop(self, *, reason: str) -> None:
        if not self._stopping:
            self._log.info("supervisor_stop_requested", reason=reason)
        self._stopping = True

    # ---------------------------------------------------------- children: start

    def _start_all(self) -> None:
        for spec in list(self._specs.values()):
            try:
                self._popen(spec)
            except OSError as exc:
                # The command itself cannot be run: respawning would fail the same way.
                self._boot_failed(spec.slot, error=repr(exc))
                return
        self._readiness = Readiness({spec.slot: spec.ready_file for spec in self._specs.values()
                                     if spec.ready_file is not None})
        self._report_status()
        self._check_ready()

    def _check_ready(self) -> None:
        """Send READY=1 (and call on_ready) once every initial slot has reported ready."""
        live: dict[str, set[int]] = collections.defaultdict(set)
        for pid, child in self._children.items():
            live[child.slot].add(pid)
        if self._readiness.check(live, self._specs):
            if self._not_ready_reason is not None:
                self._log.warning("supervisor_not_ready", slots=sorted(self._specs),
                                  reason=self._not_ready_reason)
                self._report_status()
                return
            self._log.info("supervisor_ready", slots=sorted(self._specs))
            sdnotify.notify("READY=1")
            self._report_status()  # STATUS= without "waiting for" from now on
            if self._on_ready is not None:
                self._on_ready()

    def _spawn(self, spec: ChildSpec) -> None:
        """Start a child later in life; a failed fork or exec is retried with backoff. Not
        when the code on disk changed since the service started: the service stops instead
        (see `code_changed`)."""
        if self._code_changed is not None and (change := self._code_changed()) is not None:
            self._code_replaced(spec.slot, change)
            return
        try:
            self._popen(spec)
        except OSError as exc:
            # Typically EAGAIN or ENOMEM under memory pressure: transient, so back off.
            self._log.error("child_spawn_failed", slot=spec.slot, error=repr(exc))
            self._schedule_respawn(spec.slot, lived_s=0.0)
            return
        self._report_status()

    def _popen(self, spec: ChildSpec) -> None:
        child = start_child(spec)
        self._children[child.popen.pid] = child
        self._log.info("child_started", slot=spec.slot, child_pid=child.popen.pid)

    # ------------------------------------------------------------ children: exit

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return  # no children at all
            if pid == 0:
                return  # children remain, none has exited
            child = self._children.pop(pid, None)
            if child is None:
                self._log.debug("unknown_child_reaped", child_pid=pid, **describe_exit(status))
                continue
            # Popen would otherwise warn "still running" and try to wait for it again.
            child.popen.returncode = returncode(status)
            self._child_exited(pid, child, status)

    def _child_exited(self, pid: int, child: Child, status: int) -> None:
        lived_s = time.monotonic() - child.started_at
        fields = describe_exit(status, killed_by_supervisor=child.killed_by_supervisor)
        expected = self._stopping or child.retire_by is not None
        log = self._log.info if expected else self._log.warning
        log("child_exited", slot=child.slot, child_pid=pid, lived_s=round(lived_s, 3), **fields)
        if expected or child.slot not in self._specs:
            self._report_status()
            return
        if fields.get("exit_code") == BOOT_ERROR_EXIT:
            self._boot_failed(child.slot, child_pid=pid)
            return
        self._metrics.restarted(child.slot, fields, hung=child.aborted_at is not None)
        self._schedule_respawn(child.slot, lived_s=lived_s)
        self._report_status()

    def _schedule_respawn(self, slot: str, *, lived_s: float) -> None:
        if lived_s >= self._stable_after_s:
            self._failures[slot] = 0
        self._failures[slot] += 1
        delay_s = respawn_delay_s(self._failures[slot], self._respawn_base_s, self._respawn_cap_s)
        self._respawn_at[slot] = time.monotonic() + delay_s
        self._log.info("child_respawn_scheduled", slot=slot, delay_s=delay_s,
                       consecutive_failures=self._failures[slot])

    def _boot_failed(self, slot: str, **fields: Any) -> None:
        self._log.error("child_boot_failed", slot=slot, exit_code=BOOT_ERROR_EXIT, **fields)
        print(f"hookline: {slot} could not boot (exit {BOOT_ERROR_EXIT}); "
              "see its log above; stopping", file=sys.stderr, flush=True)
        self._exit_code = BOOT_ERROR_EXIT
        self._request_stop(reason="child_boot_failed")

    def _code_replaced(self, slot: str, change: str) -> None:
        self._log.error("code_changed_on_disk", slot=slot, change=change,
                        exit_code=TRANSIENT_EXIT)
        print(f"hookline: not starting {slot}: {change}. A process of the new code beside "
              "those of the old one would migrate the database under them; stopping the "
              f"service (exit {TRANSIENT_EXIT}) so that all of it starts again on the new "
              "code (systemd does so; otherwise start it again)", file=sys.stderr, flush=True)
        self._exit_code = TRANSIENT_EXIT
        self._request_stop(reason="code_changed_on_disk")

    def _kill_overdue_retirees(self, now: float) -> None:
        for pid, child in self._children.items():
            if child.retire_by is not None and now >= child.retire_by \
                    and not child.killed_by_supervisor:
                child.killed_by_supervisor = True
                self._send(pid, signal.SIGKILL)

    # -------------------------------------------------------------------- stop

    def _stop_children(self) -> None:
        self._stopping = True
        self._respawn_at.clear()
        self._log.info("supervisor_stopping", children=len(self._children),
                       graceful_timeout_s=self._graceful_timeout_s)
        sdnotify.notify(f"STOPPING=1\nSTATUS=stopping {len(self._children)} children")
        self._write_status()
        for pid in list(self._children):
            self._send(pid, signal.SIGTERM)
        self._reap_until(time.monotonic() + self._graceful_timeout_s)
        if self._children:
            for pid, child in self._children.items():
                child.killed_by_supervisor = True
                self._send(pid, signal.SIGKILL)
            self._reap_until(time.monotonic() + _KILL_REAP_TIMEOUT_S)
        self._log.info("supervisor_stopped", exit_code=self._exit_code,
                       left_running=[c.slot for c in self._children.values()])

    def _reap_until(self, deadline: float) -> None:
        """Reap every 0.1 s (or on SIGCHLD) until no child is left or `deadline` passes."""
        self._reap()
        while self._children:
            now = time.monotonic()
            if now >= deadline:
                return
            self._signals.sleep(min(_REAP_INTERVAL_S, deadline - now))
            # Already stopping: further signals change nothing, SIGCHLD included (we reap).
            self._signals.clear()
            self._reap()
            self._tick(time.monotonic())

    def _send(self, pid: int, signum: signal.Signals) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass  # it already exited; the next reap collects it

    # ---------------------------------------------------------------- status

    def _report_status(self) -> None:
        sdnotify.notify("STATUS=" + status_line(
            running=len(self._children), wanted=len(self._specs),
            workers_wanted=len(worker_slots(self._specs)),
            waiting_for=None if self._readiness.done else self._readiness.pending,
            not_ready_reason=self._not_ready_reason))
        self._write_status()

    def status(self) -> dict[str, Any]:
        """Return the supervisor's view: what `status_file` holds
        (:func:`hookline.supervisor.status_report.status_view`)."""
        return status_view(self._children, unhealthy=self._unhealthy, stopping=self._stopping,
                           workers_wanted=len(worker_slots(self._specs)))

    def _write_status(self) -> None:
        if self._status_file is None:
            return
        try:
            write_status(self._status_file, self.status())
        except OSError as exc:
            self._log.warning("status_write_failed", path=str(self._status_file),
                              error=str(exc))
