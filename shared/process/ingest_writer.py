"""Where the ingest writer process (`ingest_writer = process`, SQLite only) runs and listens:
read by the supervisor, which starts it, and by each ingest process, which sends it its
batches (ingest/writer_link.py, ingest/writer_process.py).

The writer listens on `<runtime_dir>/ingest-writer.sock`. When that path is too long for a
Unix socket (about 100 bytes), it listens in a folder of its own that it makes in the temp
folder (`hookline-writer-XXXXXXXX`, mode 0700, a random name: nobody else can put a file
there or guess it in advance). Either way it writes the socket's path to
`<runtime_dir>/ingest-writer.address` once it listens, and the ingest processes read that
file each time they connect.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from hookline.shared.config import Config
from hookline.shared.db_url import sqlite_path
from hookline.shared.process.lifecycle import runtime_dir

WRITER_SLOT = "ingest-writer"
"""The supervisor's slot (and log name) of the writer process."""
WRITER_ADDRESS_FILE = f"{WRITER_SLOT}.address"
"""The file in the runtime folder that names the socket the writer listens on."""

_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux; keep a margin
_PRIVATE_PREFIX = "hookline-writer-"


def uses_writer_process(config: Config) -> bool:
    """Whether `config` runs ingest's commits in the writer process: `ingest_writer =
    process` (in any case, as the setting's check accepts it) on a SQLite database
    (PostgreSQL ignores the setting).

    Raises:
        ConfigError: the database URL is unsupported.
    """
    return (config.ingest_writer.lower() == "process"
            and sqlite_path(config.db) is not None)


def address_file(config: Config) -> Path:
    """`<runtime_dir>/ingest-writer.address`: the path of the socket the writer listens on,
    written once it listens."""
    return runtime_dir(config) / WRITER_ADDRESS_FILE


def published_socket(config: Config) -> Path | None:
    """The socket the running writer announced (:func:`address_file`), or None when it has
    announced none (not started yet, or stopped)."""
    return socket_named_in(address_file(config))


def socket_named_in(address: Path) -> Path | None:
    """The socket the address file `address` names, or None when there is none to read
    (:func:`published_socket` for a given file: the bench's feeder reads the service's)."""
    try:
        text = address.read_text().strip()
    except (OSError, ValueError):  # none yet, or not a file this service wrote: none
        return None
    return Path(text) if text else None


def make_socket_path(config: Config) -> Path:
    """A path for the writer to listen on: `<runtime_dir>/ingest-writer.sock` when it fits
    a Unix socket's address, else a socket in a new private folder in the temp folder
    (module docstring). Removes what a writer killed earlier left there.

    Raises:
        OSError: a folder cannot be made.
    """
    _remove_previous(config)
    folder = runtime_dir(config).absolute()
    beside = folder / f"{WRITER_SLOT}.sock"
    if len(os.fsencode(beside)) < _MAX_SOCKET_PATH:  # bytes, as the kernel counts
        # a killed writer's (the service lock makes this runtime folder this service's)
        beside.unlink(missing_ok=True)
        return beside
    return Path(tempfile.mkdtemp(prefix=_PRIVATE_PREFIX)) / "s.sock"


def publish_socket(config: Config, path: Path) -> None:
    """Announce `path` to the ingest processes (written whole: a reader never sees half).

    Raises:
        OSError: the runtime folder cannot be written.
    """
    target = address_file(config)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    # 0600: the private folder's name is this service's business alone
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(f"{path}\n")
    os.replace(partial, target)


def withdraw_socket(config: Config, path: Path) -> None:
    """Remove the socket, its private folder if it had one, and the announcement."""
    with contextlib.suppress(FileNotFoundError):
        if published_socket(config) == path:
            address_file(config).unlink()
    with contextlib.suppress(OSError):
        _remove_socket(path)


def _remove_previous(config: Config) -> None:
    """The socket (and private folder) a writer killed before it could withdraw it. What
    the address names may no longer be ours (the temp folder was emptied at a reboot, and
    another user made something of that name since): it is left alone then, and never
    stops this writer from starting."""
    previous = published_socket(config)
    if previous is not None:
        with contextlib.suppress(OSError):
            _remove_socket(previous)


def _remove_socket(path: Path) -> None:
    """Remove the socket `path` if it is one of this user's, and its folder if that is a
    private folder this user made (checked without following links: never, say, /tmp
    itself, another user's folder, or a file a link points to).

    Raises:
        OSError: looking at them failed.
    """
    folder = path.parent
    private = folder.name.startswith(_PRIVATE_PREFIX) and folder.parent == Path(
        tempfile.gettempdir())
    if private and not _own(folder, stat.S_ISDIR, 0o700):
        return  # not the folder this user's writer made: touch nothing inside it
    if _own(path, stat.S_ISSOCK):
        path.unlink()
    if private:
        shutil.rmtree(folder, ignore_errors=True)


def _own(path: Path, kind: Callable[[int], bool], mode: int | None = None) -> bool:
    """Whether `path` itself (not what a link at it points to) is of `kind`, owned by this
    process's user, and (when given) has exactly permission bits `mode`."""
    try:
        found = path.lstat()
    except FileNotFoundError:
        return False
    return (kind(found.st_mode) and found.st_uid == os.getuid()
            and (mode is None or stat.S_IMODE(found.st_mode) == mode))
