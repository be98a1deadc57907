"""One `hookline serve` per database and per runtime folder.

The first thing `hookline serve` does, before it checks the database, writes a runtime file or
starts a child, is take an exclusive `flock(2)` on each of :func:`service_lock_paths`, and it
holds them for its whole life. The kernel drops such a lock when the process ends, however it
ends (SIGKILL included), so a crashed supervisor never blocks the next start, and there is no
stale lock to clean up: the lock files stay in place between runs, only the lock matters.

Which files:

* a SQLite database: `<db>.serve.lock` beside the file, so two services on one database are
  refused whatever their runtime folders, listen addresses or configs;
* every backend: `<runtime_dir>/serve.lock`, so one host's runtime folder (heartbeats,
  `status.json`) holds one supervisor. PostgreSQL gets no database-wide lock (no advisory
  lock): several hosts legitimately serve one PostgreSQL database.

Once held, each lock file records the holder's pid and listen address (JSON), so a refused
second `serve` (and `serve --check`) can name the running supervisor.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from hookline.shared.config import Config
from hookline.shared.db_url import StorageRefused, sqlite_path
from hookline.shared.errors import HooklineError
from hookline.shared.process.lifecycle import runtime_dir
from hookline.shared.store.checks import check_database_folder, refuse_network_filesystem

LOCK_FILE = "serve.lock"
"""Name of the lock file inside the runtime folder."""
DB_LOCK_SUFFIX = ".serve.lock"
"""Suffix of the lock file beside a SQLite database (`hookline.db.serve.lock`)."""
_HOLDER_READ_TRIES = 10
_HOLDER_READ_PAUSE_S = 0.02  # a new holder writes its record right after taking the lock


@dataclass(frozen=True, slots=True)
class LockHolder:
    """Who holds a service lock, as its lock file says (None: not written yet)."""

    pid: int | None
    listen: str | None
    command: str | None = None  # a command other than serve holding it (hold_database)

    def describe(self) -> str:
        """`supervisor pid 1234, listening on 127.0.0.1:8080`, `hookline migrate-store pid
        1234`, or what is unknown."""
        pid = f"pid {self.pid}" if self.pid is not None else "pid unknown (starting)"
        if self.command is not None:
            return f"{self.command} {pid}"
        listen = self.listen if self.listen is not None else "an unknown address"
        return f"supervisor {pid}, listening on {listen}"


class ServiceLocked(HooklineError):
    """Another `hookline serve` already holds a service lock: this one must not start.

    Attributes:
        path: the lock file.
        holder: the running supervisor, as recorded in the lock file.
    """

    def __init__(self, path: Path, holder: LockHolder, what: str) -> None:
        if holder.command is not None:
            message = (f"{holder.describe()} holds {what} (lock {path}); start the service "
                       "once it has ended")
        else:
            message = (f"another hookline serve already runs on {what}: {holder.describe()} "
                       f"(lock {path}); stop it first, or {_own_paths_advice(path)}")
        super().__init__(message)
        self.path = path
        self.holder = holder


def _own_paths_advice(path: Path) -> str:
    """What a second service needs to run beside the holder of the lock file `path`: a SQLite
    database serves one service, so its own db (and with it its runtime folder); a runtime
    folder, the only lock on PostgreSQL (several services share one database there), only its
    own runtime_dir and pid_file (whose default, ./hookline.pid, it would share too)."""
    if path.name.endswith(DB_LOCK_SUFFIX):  # `<db>.serve.lock`; the folder's is `serve.lock`
        return "give this service its own db and runtime_dir (one service per SQLite database)"
    return "give this service its own runtime_dir and pid_file"


def service_lock_paths(config: Config) -> list[tuple[Path, str]]:
    """The lock files `hookline serve` holds for `config`, each with what it guards.

    Returns:
        For SQLite `[(<db>.serve.lock, "database <db>"), (<runtime_dir>/serve.lock,
        "runtime folder <runtime_dir>")]`; for PostgreSQL only the runtime folder's.
    """
    paths = []
    db = sqlite_path(config.db)
    if db is not None:
        paths.append((Path(db + DB_LOCK_SUFFIX), f"database {db}"))
    folder = runtime_dir(config)
    paths.append((folder / LOCK_FILE, f"runtime folder {folder}"))
    return paths


class ServiceLock:
    """The held service locks of this `hookline serve` (a context manager releasing them).

    Take them with :meth:`take`; the file descriptors are not inherited by children (Python
    opens them close-on-exec), so a lock lives exactly as long as the supervisor.
    """

    def __init__(self, fds: list[int]) -> None:
        self._fds = fds

    @classmethod
    def take(cls, config: Config) -> ServiceLock:
        """Take every lock of :func:`service_lock_paths` without waiting, then record this
        process's pid and `config.listen` in each. Creates the runtime folder if missing.

        Raises:
            ServiceLocked: another supervisor holds one (nothing is left held).
            StorageRefused: the SQLite database's folder is missing, not a folder,
                world-writable, not writable (:func:`check_database_folder`) or on a network
                filesystem without the opt-in.
            OSError: the runtime folder or its lock file cannot be created.
        """
        db = sqlite_path(config.db)
        if db is not None:  # refused storage gets no lock file either
            check_database_folder(db, writable=False)
            refuse_network_filesystem(db, allowed=config.allow_network_filesystem)
        record = json.dumps({"pid": os.getpid(), "listen": config.listen}).encode()
        fds: list[int] = []
        try:
            for path, what in service_lock_paths(config):
                path.parent.mkdir(parents=True, exist_ok=True)  # the runtime folder
                fd = _open_lock_file(path, db)
                fds.append(fd)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise ServiceLocked(path, _read_holder(fd), what) from None
            for fd in fds:  # only once all are held: a refused start writes nothing
                os.ftruncate(fd, 0)
                os.pwrite(fd, record, 0)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return cls(fds)

    def release(self) -> None:
        """Drop the locks (idempotent); process exit does the same."""
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []

    def __enter__(self) -> ServiceLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def held_service_locks(config: Config) -> list[tuple[Path, str, LockHolder]]:
    """The service locks of `config` another process holds now, each with what it guards and
    its holder; creates nothing (for `serve --check`).

    The probe takes each existing lock shared for an instant, so a `serve` starting at that
    very moment could be refused once; a missing lock file is free.
    """
    held = []
    for path, what in service_lock_paths(config):
        try:
            holder = _holder_now(path)
        except OSError:
            continue  # missing (free) or unreadable: `serve` itself will say
        if holder is not None:
            held.append((path, what, holder))
    return held


def hold_database(db_path: str, command: str) -> ServiceLock:
    """Take the SQLite database's service lock (`<db>.serve.lock`) for a command that must
    not run beside a service (`migrate-store`), so no `hookline serve` starts on the database
    while it runs either; the lock file records `command` and this pid. Release it with the
    returned lock (a `with` block), or by ending the process.

    Raises:
        ServiceLocked: a service (or another such command) holds it; `holder` says who.
        OSError: the lock file cannot be created or opened (another user's, say).
    """
    path = Path(db_path + DB_LOCK_SUFFIX)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ServiceLocked(path, _read_holder(fd), f"database {db_path}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "command": command}).encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return ServiceLock([fd])


def database_served_by(db_path: str) -> LockHolder | None:
    """Who holds the SQLite database's service lock now (a running `hookline serve`, or a
    command such as `migrate-store`), or None; creates nothing.

    Raises:
        OSError: the lock file exists but cannot be opened (another user's service, say).
    """
    try:
        return _holder_now(Path(db_path + DB_LOCK_SUFFIX))
    except FileNotFoundError:
        return None  # never served, so free


def _holder_now(path: Path) -> LockHolder | None:
    """Who holds the lock file at `path` now, or None: it is taken shared for an instant.

    Raises:
        OSError: the file cannot be opened (FileNotFoundError: it does not exist).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_holder(fd)
    finally:
        os.close(fd)  # also drops the shared lock
    return None


def _open_lock_file(path: Path, db: str | None) -> int:
    """Open (creating, 0600) a lock file for writing. A SQLite folder that refuses it is a
    storage refusal; a runtime folder's failure stays an OSError."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except PermissionError as exc:
        if db is not None and path.parent == Path(db).parent:
            raise StorageRefused(f"refusing database {db}: cannot create its lock file "
                                 f"{path}: {exc.strerror} (run as the service user, or fix "
                                 "the folder's owner)") from exc
        raise


def _read_holder(fd: int) -> LockHolder:
    """The holder recorded in an open lock file; retried briefly, since a supervisor that
    has just taken the lock writes its record right after."""
    for _ in range(_HOLDER_READ_TRIES):
        try:
            data = json.loads(os.pread(fd, 4096, 0) or b"null")
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict):
            pid, listen, command = data.get("pid"), data.get("listen"), data.get("command")
            return LockHolder(pid=pid if isinstance(pid, int) else None,
                              listen=listen if isinstance(listen, str) else None,
                              command=command if isinstance(command, str) else None)
        time.sleep(_HOLDER_READ_PAUSE_S)
    return LockHolder(pid=None, listen=None)
