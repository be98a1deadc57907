"""Where the ingest writer process (`ingest_writer = process`, SQLite only) runs and listens:
read by the supervisor, which starts it, and by each ingest process, which sends it its
batches (ingest/writer_link.py, ingest/writer_process.py)."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from hookline.shared.config import Config
from hookline.shared.db_url import sqlite_path
from hookline.shared.process.lifecycle import runtime_dir

WRITER_SLOT = "ingest-writer"
"""The supervisor's slot (and log name) of the writer process."""

_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux; keep a margin


def uses_writer_process(config: Config) -> bool:
    """Whether `config` runs ingest's commits in the writer process: `ingest_writer =
    process` on a SQLite database (PostgreSQL ignores the setting).

    Raises:
        ConfigError: the database URL is unsupported.
    """
    return config.ingest_writer == "process" and sqlite_path(config.db) is not None


def writer_socket_path(config: Config) -> Path:
    """Where the writer listens: `<runtime_dir>/ingest-writer.sock`, or, when that path is
    too long for a Unix socket, a name in the temp folder derived from it (both ends check
    the peer's user id, so a name in a shared folder is safe)."""
    beside = runtime_dir(config).absolute() / f"{WRITER_SLOT}.sock"
    if len(str(beside)) < _MAX_SOCKET_PATH:
        return beside
    digest = hashlib.sha256(str(beside).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"hookline-writer-{digest}.sock"
