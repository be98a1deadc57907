"""Which store a database URL or a `Config` names, built with every storage setting applied:
SQLite for a file path or `sqlite:///` URL, PostgreSQL for a `postgresql://` URL. The backends
load on demand, so a SQLite service never imports the PostgreSQL driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hookline.shared.db_url import parse_db_url
from hookline.shared.policy.notify import NotifyPolicy
from hookline.shared.store.pg_limits import PostgresLimits

if TYPE_CHECKING:
    from hookline.shared.config import Config
    from hookline.shared.store import Store


@dataclass(frozen=True, slots=True)
class SqliteOptions:
    """Settings only a SQLite store reads (a PostgreSQL URL ignores them).

    Attributes:
        synchronous: `FULL` or `NORMAL` (see Config.synchronous).
        busy_timeout_s: how long a statement waits for the write lock, seconds.
        allow_network_filesystem: accept a folder on a network or FUSE filesystem.
        create: create a missing database file (False: opening it raises DatabaseMissing).
        wal_degraded_bytes: the `-wal` size past which :meth:`Store.health` is degraded.
        inline: transactions on the calling event loop's thread (see SqliteStore: the
            workers' store).
    """

    synchronous: str = "FULL"
    busy_timeout_s: float = 5.0
    allow_network_filesystem: bool = False
    create: bool = True
    wal_degraded_bytes: int = 256 * 1024 * 1024
    inline: bool = False


def open_store(url: str, sqlite: SqliteOptions | None = None,
               postgres: PostgresLimits | None = None) -> Store:
    """Build (not yet open) the store for a database URL.

    Args:
        url: a SQLite file path, or `sqlite:///PATH` (relative) / `sqlite:////PATH` (absolute),
            as SQLAlchemy spells them.
            `postgresql://` / `postgres://` URLs select the PostgreSQL store (many hosts).
        sqlite: the SQLite store's settings (defaults when None).
        postgres: the PostgreSQL store's timeouts and keepalives (defaults when None).

    Raises:
        ConfigError: the URL names an unsupported backend; StorageRefused (a ConfigError)
            when it names a database private to one process (`:memory:`, a `file:` URI, an
            empty path): see :func:`hookline.shared.db_url.parse_db_url`.
    """
    db = parse_db_url(url)
    if db.dsn is not None:
        from hookline.shared.store.postgres import PostgresStore  # noqa: PLC0415  (backends load on demand)

        return PostgresStore(db.dsn, limits=postgres or PostgresLimits())
    from hookline.shared.store.sqlite import SqliteStore  # noqa: PLC0415  (backends load on demand)

    options = sqlite or SqliteOptions()
    return SqliteStore(str(db.path), synchronous=options.synchronous,
                       busy_timeout_s=options.busy_timeout_s,
                       allow_network_filesystem=options.allow_network_filesystem,
                       create=options.create, wal_degraded_bytes=options.wal_degraded_bytes,
                       inline=options.inline)


def store_for(config: Config, *, create: bool = True, worker: bool = False,
              inline: bool = False) -> Store:
    """Build (not yet open) the store `config` names, with every storage setting applied
    (and the operational-event policy).

    Args:
        create: whether opening it may create a missing SQLite file (the service and
            `hookline init`); with False, :meth:`Store.open` raises DatabaseMissing instead.
        worker: the store of a worker process. On SQLite its transactions run on the calling
            event loop's thread (SqliteOptions.inline) and commit with
            `worker_synchronous`: no caller waits on a worker's commit, so a commit a
            power loss undoes only sends its deliveries again (at least once), while an
            event's commit, answered 202, keeps `synchronous`. PostgreSQL ignores it.
        inline: on SQLite, transactions on the calling event loop's thread with
            `synchronous` (the ingest writer process's store: it has no HTTP to run beside
            them). PostgreSQL ignores it.

    Raises:
        ConfigError: as :func:`open_store`.
    """
    store = open_store(config.db, SqliteOptions(
        synchronous=config.worker_synchronous if worker else config.synchronous,
        busy_timeout_s=config.busy_timeout_s,
        allow_network_filesystem=config.allow_network_filesystem, create=create,
        wal_degraded_bytes=config.wal_degraded_bytes, inline=worker or inline),
        postgres_limits(config))
    store.notify = notify_policy(config)
    return store


def notify_policy(config: Config) -> NotifyPolicy:
    """When the store makes operational events (shared/policy/notify.py), from `notify_*`
    and `public_url`."""
    return NotifyPolicy(failing_streak=config.notify_failing_streak,
                        failing_after_s=config.notify_failing_after_s,
                        dead_letters_step=config.notify_dead_letters_step,
                        dead_letters_interval_s=config.notify_dead_letters_interval_s,
                        public_url=config.public_url)


def read_store_for(config: Config) -> Store | None:
    """A second store on `config`'s database for long whole-table reads (/metrics, stats),
    or None when the store's own connections already serve them beside its writes.

    SQLite: a store on its own connection and thread, so a scan of a million rows never
    stalls the writes queued on the first one. PostgreSQL: None (a pool of connections).
    Not opened; the caller opens and closes it.
    """
    return None if parse_db_url(config.db).dsn is not None else store_for(config)


def postgres_limits(config: Config) -> PostgresLimits:
    """The PostgreSQL store's bounds (shared/store/pg_limits.py) from the `pg_*` settings."""
    return PostgresLimits(
        connect_timeout_s=config.pg_connect_timeout_s,
        acquire_timeout_s=config.pg_acquire_timeout_s,
        transaction_timeout_s=config.pg_transaction_timeout_s,
        statement_timeout_s=config.pg_statement_timeout_s,
        idle_in_transaction_timeout_s=config.pg_idle_in_transaction_timeout_s,
        lock_timeout_s=config.pg_lock_timeout_s,
        keepalives_idle_s=config.pg_keepalives_idle_s,
        keepalives_interval_s=config.pg_keepalives_interval_s,
        keepalives_count=config.pg_keepalives_count,
        tcp_user_timeout_s=config.pg_tcp_user_timeout_s)
