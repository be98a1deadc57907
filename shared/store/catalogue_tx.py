"""Event-type catalogue transactions (migration 015), written once for both backends as
generators of :mod:`hookline.shared.store.ops` operations; :class:`CatalogueOperations` gives
:class:`hookline.shared.store.logic.StoreLogic` their methods and :class:`CatalogueStore`
declares them for :class:`hookline.shared.store.Store`.

Every write counts one change in `catalogue_state.revision`, in the same transaction: each
ingest process reads that one number every second and reloads the catalogue only when it
moved (ingest/catalogue_cache.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from hookline.shared.catalogue import EventType
from hookline.shared.errors import NotFound
from hookline.shared.policy import inputs
from hookline.shared.store.ops import Tx, count, one, rows

T = TypeVar("T")


class CatalogueStore(Protocol):
    """The catalogue's part of the store (see :class:`hookline.shared.store.Store`)."""

    async def catalogue_revision(self) -> int:
        """The catalogue's change counter: it goes up with every change (one-row read)."""

    async def list_event_types(self) -> list[EventType]:
        """Every catalogue type with its schemas and examples, by name ([]: no catalogue)."""

    async def get_event_type(self, name: str) -> EventType:
        """One catalogue type. Raises NotFound."""

    async def put_event_types(self, types: Sequence[EventType]) -> list[tuple[EventType, bool]]:
        """Create or replace catalogue types (fields, schema versions and examples), in one
        transaction; checked beforehand by :func:`hookline.shared.catalogue.event_type_fields`.

        Returns:
            Each type as stored, and whether it was created.
        """

    async def archive_event_type(self, name: str, archived: bool = True) -> EventType:
        """Set (or clear) a type's archived flag. Raises NotFound."""

    async def remove_event_type(self, name: str) -> None:
        """Delete a type and its schemas (events of that type are kept). Raises NotFound."""


class CatalogueOperations:
    """Store methods for the catalogue; the backend supplies `_transact`."""

    async def _transact(self, tx: Tx[T], *, write: bool) -> T:
        """Drive `tx` as one transaction (the backend's)."""
        raise NotImplementedError

    async def catalogue_revision(self) -> int:
        """See :meth:`CatalogueStore.catalogue_revision`."""
        row = await self._transact(_query_tx(one("catalogue_revision")), write=False)
        return int(row["revision"]) if row is not None else 0

    async def list_event_types(self) -> list[EventType]:
        """See :meth:`CatalogueStore.list_event_types`."""
        return await self._transact(list_event_types_tx(), write=False)

    async def get_event_type(self, name: str) -> EventType:
        """See :meth:`CatalogueStore.get_event_type`."""
        return await self._transact(_get_tx(name), write=False)

    async def put_event_types(self, types: Sequence[EventType]) -> list[tuple[EventType, bool]]:
        """See :meth:`CatalogueStore.put_event_types`."""
        return await self._transact(_put_tx(types), write=True)

    async def archive_event_type(self, name: str, archived: bool = True) -> EventType:
        """See :meth:`CatalogueStore.archive_event_type`."""
        return await self._transact(_archive_tx(name, archived), write=True)

    async def remove_event_type(self, name: str) -> None:
        """See :meth:`CatalogueStore.remove_event_type`."""
        await self._transact(_remove_tx(name), write=True)


def _query_tx(query: Any) -> Tx[Any]:
    return (yield query)


def list_event_types_tx() -> Tx[list[EventType]]:
    """Every catalogue type with its schema versions and examples, by name."""
    found = yield rows("list_event_types")
    if not found:
        return []
    by_type: dict[str, list[Any]] = {}
    for r in (yield rows("list_event_type_schemas")):
        by_type.setdefault(r["event_type"], []).append(r)
    return [EventType.from_rows(r, by_type.get(r["name"], [])) for r in found]


def _get_tx(name: str) -> Tx[EventType]:
    row = yield one("get_event_type", name=name)
    if row is None:
        raise NotFound(f"no event type {inputs.clip(name)!r} in the catalogue")
    return EventType.from_rows(row, (yield rows("get_event_type_schemas", name=name)))


def _put_tx(types: Sequence[EventType]) -> Tx[list[tuple[EventType, bool]]]:
    out: list[tuple[EventType, bool]] = []
    for event_type in types:
        existed = (yield one("get_event_type", name=event_type.name)) is not None
        yield one("put_event_type", name=event_type.name,
                  description=event_type.description, validation=event_type.validation,
                  deprecated=event_type.deprecated, archived=event_type.archived)
        yield count("delete_event_type_schemas", name=event_type.name)
        for version, schema in sorted(event_type.schemas.items()):
            example = event_type.examples.get(version)
            yield count("insert_event_type_schema", name=event_type.name, version=version,
                        schema=json.dumps(schema, separators=(",", ":")),
                        example=None if version not in event_type.examples
                        else json.dumps(example, separators=(",", ":")))
        out.append(((yield from _get_tx(event_type.name)), not existed))
    if types:
        yield one("bump_catalogue_revision")
    return out


def _archive_tx(name: str, archived: bool) -> Tx[EventType]:
    if (yield one("archive_event_type", name=name, archived=archived)) is None:
        raise NotFound(f"no event type {inputs.clip(name)!r} in the catalogue")
    yield one("bump_catalogue_revision")
    return (yield from _get_tx(name))


def _remove_tx(name: str) -> Tx[None]:
    yield count("delete_event_type_schemas", name=name)  # whatever the foreign key setting
    if not (yield count("delete_event_type", name=name)):
        raise NotFound(f"no event type {inputs.clip(name)!r} in the catalogue")
    yield one("bump_catalogue_revision")
