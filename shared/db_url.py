"""The one parser of the `db` setting: which backend it names, and the SQLite file or the
PostgreSQL URL.

Accepted spellings: a file path (`hookline.db`), `sqlite:///PATH` (relative) or
`sqlite:////PATH` (absolute) as SQLAlchemy spells them, and `postgresql://` or `postgres://`
URLs (libpq syntax, as asyncpg reads them). A SQLite database private to one process is
refused here, because an event answered 2xx must be seen by every process of the service.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from hookline.shared.errors import ConfigError

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
SQLITE_SCHEME = "sqlite:///"
_PLAIN_PATH_HINT = ("use a file path every hookline process shares, e.g. "
                    "--db /var/lib/hookline/hookline.db (or sqlite:////var/lib/hookline/"
                    "hookline.db), or a postgresql:// URL")


class StorageRefused(ConfigError):
    """The database cannot keep the delivery promise (in memory, network filesystem, not in
    WAL mode, damaged); the message says what to use or do instead. Permanent: retrying or
    restarting does not help."""


@dataclass(frozen=True, slots=True)
class DbUrl:
    """A parsed `db` setting.

    Attributes:
        backend: `sqlite` or `postgresql`.
        path: the SQLite file (as given: relative paths are relative to the working folder);
            None for PostgreSQL.
        dsn: the PostgreSQL URL as given; None for SQLite.
    """

    backend: Literal["sqlite", "postgresql"]
    path: str | None = None
    dsn: str | None = None

    @property
    def is_postgres(self) -> bool:
        """True when the URL names a PostgreSQL database."""
        return self.backend == "postgresql"


def is_postgres_url(url: str) -> bool:
    """True when `url` names a PostgreSQL database (no other check is made)."""
    return url.startswith(POSTGRES_SCHEMES)


def parse_db_url(url: str) -> DbUrl:
    """Parse a `db` setting.

    Args:
        url: a file path, `sqlite:///PATH` (relative) / `sqlite:////PATH` (absolute), or a
            `postgresql://` / `postgres://` URL.

    Returns:
        The backend with its file path (SQLite) or URL (PostgreSQL).

    Raises:
        ConfigError: another scheme. StorageRefused: an in-memory database (`:memory:`,
            `file:` URIs such as `file::memory:` or `?mode=memory`), an empty path, or query
            parameters on a sqlite:/// URL: each process would get a private database, and
            events answered 2xx would be lost.
    """
    if is_postgres_url(url):
        return DbUrl("postgresql", dsn=url)
    if "://" in url and not url.startswith(SQLITE_SCHEME):
        raise ConfigError(f"unsupported database URL {redact_url(url)!r}; use a path, "
                          "sqlite:///PATH or "
                          "postgresql://...")
    path = url.removeprefix(SQLITE_SCHEME)
    if not path.strip():
        raise StorageRefused(f"the database path is empty (SQLite would give each process a "
                             f"private temporary database); {_PLAIN_PATH_HINT}")
    if path == ":memory:":
        raise StorageRefused("an in-memory database (:memory:) is private to one process and "
                             f"lost when it exits, so accepted events would vanish; "
                             f"{_PLAIN_PATH_HINT}")
    if path.startswith("file:"):
        # This SQLite reads file: names as URIs (mode=memory, vfs=..., immutable=...), any
        # of which can give each process its own database or turn off locking.
        raise StorageRefused(f"SQLite URI {path!r} is not accepted (it can name a private "
                             f"in-memory or unlocked database); {_PLAIN_PATH_HINT}")
    if url.startswith(SQLITE_SCHEME) and "?" in path:
        raise StorageRefused(f"query parameters in {url!r} are not supported (they could make "
                             f"the database in-memory or private); {_PLAIN_PATH_HINT}")
    return DbUrl("sqlite", path=path)


def relative_url_hint(url: str) -> str:
    """For a `sqlite:///PATH` setting (three slashes: PATH is relative), a hint for a
    message about a file not found there, saying how to write an absolute path; "" for any
    other setting."""
    if url.startswith(SQLITE_SCHEME) and not url.startswith(SQLITE_SCHEME + "/"):
        return (f" ({SQLITE_SCHEME}PATH is relative to the working directory; an absolute "
                f"path is {SQLITE_SCHEME}/PATH, with four slashes, or the plain path)")
    return ""


def sqlite_path(url: str) -> str | None:
    """The SQLite file a database URL names, or None for a PostgreSQL URL.

    Raises:
        ConfigError, StorageRefused: as :func:`parse_db_url`.
    """
    return parse_db_url(url).path


HIDDEN = "***"
"""What a password in a URL is shown as."""


def redact_url(url: str) -> str:
    """`url` for people (messages, `hookline config show`, destination listings): a password
    in its user info (`https://user:PASSWORD@host/`) and in a `password=` or `sslpassword=`
    query parameter replaced by `***`, the user name and everything else verbatim. The
    authority is found as urllib's urlsplit and the database drivers find it: up to the
    first `/`, `?` or `#` after `//`, the user info ending at its last `@`, so what is
    hidden is what is sent as a password."""
    start = url.find("//")
    if start >= 0:
        start += 2
        end = min((i for i in (url.find(c, start) for c in "/?#") if i >= 0),
                  default=len(url))
        userinfo, at, host = url[start:end].rpartition("@")
        if at and ":" in userinfo:
            user = userinfo.partition(":")[0]
            url = f"{url[:start]}{user}:{HIDDEN}@{host}{url[end:]}"
    return re.sub(r"([?&](?:ssl)?password=)[^&#]*", r"\1" + HIDDEN, url,
                  flags=re.IGNORECASE)
