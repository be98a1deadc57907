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
import tempfile
from pathlib import Path

from hookline.shared.config import Config
from hookline.shared.db_url import sqlite_path
from hookline.shared.process.lifecycle import runtime_dir

WRITER_SLOT = "ingest-writer"
"""The supervisor's slot (and log name) of the writer process."""

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
    return runtime_dir(config) / f"{WRITER_SLOT}.address"


def published_socket(config: Config) -> Path | None:
    """The socket the running writer announced (:func:`address_file`), or None when it has
    announced none (not started yet, or stopped)."""
    try:
        text = address_file(config).read_text().strip()
    except FileNotFoundError:
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
    if len(str(beside)) < _MAX_SOCKET_PATH:
        beside.unlink(missing_ok=True)  # a killed writer's; the service lock makes it ours
        return beside
    return Path(tempfile.mkdtemp(prefix=_PRIVATE_PREFIX)) / "s.sock"


def publish_socket(config: Config, path: Path) -> None:
    """Announce `path` to the ingest processes (written whole: a reader never sees half).

    Raises:
        OSError: the runtime folder cannot be written.
    """
    target = address_file(config)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(f"{path}\n")
    os.replace(partial, target)


def withdraw_socket(config: Config, path: Path) -> None:
    """Remove the socket, its private folder if it had one, and the announcement."""
    with contextlib.suppress(FileNotFoundError):
        if published_socket(config) == path:
            address_file(config).unlink()
    _remove_socket(path)


def _remove_previous(config: Config) -> None:
    """The socket (and private folder) a writer killed before it could withdraw it."""
    previous = published_socket(config)
    if previous is not None:
        _remove_socket(previous)


def _remove_socket(path: Path) -> None:
    path.unlink(missing_ok=True)
    folder = path.parent
    # Only a private folder this service's user made (never, say, /tmp itself).
    if (folder.name.startswith(_PRIVATE_PREFIX) and folder.parent == Path(tempfile.gettempdir())
            and folder.exists() and folder.stat().st_uid == os.getuid()):
        shutil.rmtree(folder, ignore_errors=True)
