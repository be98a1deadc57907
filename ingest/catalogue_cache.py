"""Ingest's in-memory copy of the event-type catalogue, with each schema version compiled
once, and the publish-time check of an event's `data` against it.

Staleness is bounded: every ingest process (on every host) reads the catalogue's change
counter (`catalogue_state.revision`, one row) every :data:`CATALOGUE_POLL_S` seconds and
reloads the catalogue only when the counter moved; the process that made a change through
the admin API reloads at once. So a change applies to every publish on every host at most
CATALOGUE_POLL_S plus one reload (a few milliseconds) after it committed. Compiled
validators are kept by (type, version, schema text): a reload compiles only what changed.
While the store cannot be read the last loaded catalogue stays in force (commits fail
then too).

With the catalogue empty, :meth:`CatalogueCache.check` is one dict lookup: hookline behaves
as before the catalogue existed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import jsonschema_rs
from aiohttp import web

from hookline.shared.catalogue import EventType, SchemaProblem, compile_schema, first_problem
from hookline.shared.errors import InvalidEvent, InvalidInput, StoreClosing, StoreError
from hookline.shared.logs import get_logger
from hookline.shared.policy.inputs import clip
from hookline.shared.store import Store

CATALOGUE_POLL_S = 1.0
"""How often each ingest process reads the catalogue's change counter, seconds (the bound
on how stale its copy can be, beside one reload)."""


@dataclass(frozen=True, slots=True)
class CompiledType:
    """A catalogue type as ingest checks it: its mode and a compiled validator per version."""

    validation: str
    validators: dict[int, jsonschema_rs.Draft202012Validator]
    latest: int | None


@dataclass(frozen=True, slots=True)
class Mismatch:
    """An event's `data` failed its type's schema.

    Attributes:
        event_type: the type.
        version: the schema version checked.
        validation: `warn` or `reject`.
        problem: where it failed first, and which keyword.
    """

    event_type: str
    version: int
    validation: str
    problem: SchemaProblem

    @property
    def mark(self) -> str:
        """The text stored on a warn-mode event (and logged)."""
        return f"v{self.version} {self.problem}"


class CatalogueCache:
    """The catalogue as this process last loaded it.

    Attributes:
        revision: the change counter it was loaded at (-1: never loaded).
        types: {name: compiled type} of the types whose validation is not `off`.
        size: how many types the catalogue holds (archived ones too).
    """

    def __init__(self) -> None:
        self.revision = -1
        self.types: dict[str, CompiledType] = {}
        self.size = 0
        self._compiled: dict[tuple[str, int, str], jsonschema_rs.Draft202012Validator] = {}

    def load(self, revision: int, catalogue: list[EventType]) -> None:
        """Take a freshly read catalogue (compiling only the schema versions not seen)."""
        compiled: dict[tuple[str, int, str], jsonschema_rs.Draft202012Validator] = {}
        types: dict[str, CompiledType] = {}
        for event_type in catalogue:
            if event_type.validation == "off" or not event_type.schemas:
                continue
            validators = {}
            for version, schema in event_type.schemas.items():
                key = (event_type.name, version, json.dumps(schema, sort_keys=True))
                validator = self._compiled.get(key)
                if validator is None:
                    try:
                        validator = compile_schema(schema)
                    except InvalidInput as exc:  # checked when stored; a newer validator may differ
                        get_logger().warning("catalogue_schema_unusable",
                                             event_type=event_type.name, version=version,
                                             error=exc.detail)
                        continue
                compiled[key] = validators[version] = validator
            if validators:
                types[event_type.name] = CompiledType(event_type.validation, validators,
                                                      max(validators))
        self._compiled, self.types = compiled, types
        self.size, self.revision = len(catalogue), revision

    async def refresh(self, store: Store, *, force: bool = False) -> bool:
        """Reload when the store's change counter moved (or `force`); True if it reloaded.

        Raises:
            StoreError: the store could not be read (the loaded copy stays).
        """
        revision = await store.catalogue_revision()
        if revision == self.revision and not force:
            return False
        self.load(revision, await store.list_event_types())
        return True

    def check(self, event_type: str, data: object, version: int | None) -> Mismatch | None:
        """Check an event's `data` against its type's schema (the version it names, else the
        latest).

        Returns:
            None when it passes, the type has no catalogue schema, or its validation is
            `off`; else the mismatch (the caller rejects, or marks and counts).

        Raises:
            InvalidEvent: the event names a schema version its catalogue type does not have
                (field `schema_version`).
        """
        compiled = self.types.get(event_type)
        if compiled is None:
            return None
        chosen = compiled.latest if version is None else version
        validator = compiled.validators.get(chosen) if chosen is not None else None
        if validator is None or chosen is None:
            raise InvalidEvent("schema_version", f"event type {clip(event_type)!r} has no "
                               f"schema version {version} (versions: "
                               f"{', '.join(map(str, sorted(compiled.validators)))})")
        problem = first_problem(validator, data)
        if problem is None:
            return None
        return Mismatch(event_type, chosen, compiled.validation, problem)


CATALOGUE_KEY = web.AppKey("catalogue", CatalogueCache)


def register(app: web.Application, store: Store) -> None:
    """Give the app its catalogue copy, loaded at start and kept fresh while it runs."""
    app[CATALOGUE_KEY] = CatalogueCache()

    async def keep_fresh(app: web.Application) -> AsyncIterator[None]:
        cache = app[CATALOGUE_KEY]
        with contextlib.suppress(StoreError, StoreClosing):  # the poll tries again
            await cache.refresh(store)
        task = asyncio.create_task(_poll(cache, store), name="catalogue-refresh")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(keep_fresh)


async def _poll(cache: CatalogueCache, store: Store) -> None:
    failing = False
    while True:
        await asyncio.sleep(CATALOGUE_POLL_S)
        try:
            if await cache.refresh(store):
                get_logger().info("catalogue_loaded", revision=cache.revision,
                                  types=cache.size, validated=len(cache.types))
            failing = False
        except (StoreError, StoreClosing) as exc:  # the last copy stays, try next turn
            if not failing:
                get_logger().warning("catalogue_refresh_failed", error=str(exc))
            failing = True
