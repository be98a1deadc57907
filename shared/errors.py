"""One exception root for hookline; driver and library errors are translated at the boundary."""


class HooklineError(Exception):
    """Root of every error hookline raises on purpose."""


class ConfigError(HooklineError):
    """A setting, argument or request value is missing, malformed or contradicts another: the
    caller must fix its input (the CLI exits 2); nothing was changed."""


class DatabaseMissing(ConfigError):
    """A command that only uses an existing database was pointed at a SQLite file that does
    not exist (a mistyped path would otherwise become a new, empty database)."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"no database at {path}: create it with `hookline --db {path} init` (or start "
            "`hookline serve`, which creates it), or point --db / HOOKLINE_DB / the config "
            "file's db at the existing one")
        self.path = path


class InvalidInput(ConfigError):
    """A value breaks the rule book (shared/policy/rules.py, shared/policy/inputs.py,
    shared/config.py); `field` names it as the admin API, the config file or the event body
    spells it. The one error every input rule raises: the CLI prints it and exits 2, the
    admin API answers 400 with `field`, ingest answers 400 with `field`."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"{field}: {detail}")
        self.field = field
        self.detail = detail


class InvalidSetting(InvalidInput):
    """A destination, source, retention or `Config` value breaks the rule book; `field` names
    it as the admin API (or the config file) spells it. Every entry point shows the same
    text."""


class StoreError(HooklineError):
    """The store could not do what was asked (schema too new, bad database URL, ...)."""


class StoreUnavailable(StoreError):
    """The database is unreachable, restarting, busy or read-only for a while; retry.

    Transient by definition: whoever meets it retries with backoff (or exits with
    :data:`hookline.shared.process.lifecycle.TRANSIENT_EXIT` so the supervisor respawns it), never
    stops the service for it.
    """


class StoreBusy(StoreUnavailable):
    """The database stayed locked past the busy timeout (SQLite `database is locked`), or a
    transaction lost a deadlock or lock wait (PostgreSQL)."""


class LockUnavailable(StoreBusy):
    """PostgreSQL: a row or lock this transaction needed was held by another one and was not
    granted at once (NOWAIT) or within the transaction's lock_timeout (SQLSTATE 55P03).
    Nothing changed; the same transaction shortly after usually succeeds."""


class StoreClosing(HooklineError):
    """The store, or the queue in front of it, is shutting down and takes no more work. Not a
    database fault: the caller stops (or hands its work back) instead of retrying."""


class InvalidEvent(InvalidInput):
    """An inbound event failed validation; `field` names the offending part of the input."""


class SignatureInvalid(HooklineError):
    """An inbound request's signature did not verify (wrong secret, stale timestamp, bad header)."""


class DestinationBlocked(HooklineError):
    """A destination URL resolves to an address the outbound guard refuses to connect to."""


class NotFound(HooklineError):
    """A named destination, source or job does not exist."""


class DestinationMissing(NotFound):
    """The tenant has no live destination of that name (`no destination named 'NAME'`).

    Attributes:
        name: the destination name looked for.
        tenant: the tenant looked in.
    """

    def __init__(self, name: str, tenant: str) -> None:
        super().__init__(f"no destination named {name!r}")
        self.name = name
        self.tenant = tenant


class Conflict(HooklineError):
    """The operation does not apply to the object's current state (e.g. replaying a job that
    is not dead, or one whose event body was purged), or the name is already taken."""
