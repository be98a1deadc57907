"""Tenants: the SaaS's customers, each owning its destinations and the events published for
it; and the rule book for their fields.

A tenant id is the caller's own customer id (the character rules of event ids). Ids starting
with `_` are reserved: `_default` owns everything published without a tenant.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from hookline.shared.errors import InvalidInput
from hookline.shared.models import DEFAULT_TENANT
from hookline.shared.policy.inputs import EVENT_ID_RE, clip, refuse_unknown, token
from hookline.shared.policy.rules import REMOVED_MARK

MAX_TENANT_NAME_CHARS = 200
MAX_METADATA_BYTES = 4096
"""Largest tenant metadata, as compact JSON (small: it is returned with every tenant)."""
TENANT_FIELDS = ("name", "metadata", "max_destinations", "disabled", "adopt_history")
"""What `PUT /v1/admin/tenants/{id}` accepts."""
LABEL_MARK = REMOVED_MARK
"""Between the tenant and the name in a destination label, `TENANT~NAME`: how /metrics and
the alerts name another tenant's destination (store/figures_tx.py `series_name`). Neither a
tenant id nor a live destination name holds it, so the first one splits a label."""
REMOVED_SUFFIX_RE = re.compile(re.escape(REMOVED_MARK) + r"removed-[0-9]+\Z")
"""The end of a removed destination's name, `NAME~removed-ID`: part of the name, no tenant."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """One of the SaaS's customers.

    Attributes:
        id: the caller's id for it (the idempotency namespace of its events).
        metadata: a small JSON object the caller keeps with it (hookline never reads it).
        max_destinations: most live destinations it may have (None: no limit).
        disabled: publishing for it is refused (`tenant_disabled`); its tokens stop working;
            its pending jobs still deliver.
        token_epoch: carried by its tokens; raising it revokes every token at once.
    """

    id: str
    name: str
    metadata: dict[str, Any]
    max_destinations: int | None
    disabled: bool
    token_epoch: int
    created_at: float
    updated_at: float

    @classmethod
    def from_row(cls, row: Any) -> Tenant:
        """Build from a row with the tenants table's column names."""
        return cls(id=row["id"], name=row["name"], metadata=json.loads(row["metadata"]),
                   max_destinations=row["max_destinations"], disabled=bool(row["disabled"]),
                   token_epoch=int(row["token_epoch"]), created_at=row["created_at"],
                   updated_at=row["updated_at"])

    def public(self) -> dict[str, Any]:
        """The API's view (the epoch is internal)."""
        return {"id": self.id, "name": self.name, "metadata": self.metadata,
                "max_destinations": self.max_destinations, "disabled": self.disabled,
                "created_at": self.created_at, "updated_at": self.updated_at}


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantFields:
    """Checked fields of a create-or-update: None means "leave as it is" (or the default)."""

    name: str | None = None
    metadata: str | None = None  # compact JSON
    max_destinations: int | None = None
    clear_max_destinations: bool = False
    disabled: bool | None = None
    # Creating it under the id of a deleted tenant whose events are still stored: the new
    # tenant is shown them, so only when the operator says it is the same customer.
    adopt_history: bool = False


def tenant_id(value: Any, *, field: str = "tenant", reserved_ok: bool = False,
              error: type[InvalidInput] = InvalidInput) -> str:
    """A tenant id: the event id characters; `_`-prefixed ids are reserved (only the default
    tenant's own id may be named where `reserved_ok`).

    Raises:
        InvalidInput: (or `error`) naming `field`.
    """
    checked = token(field, value, EVENT_ID_RE, error=error)
    if checked.startswith("_") and not (reserved_ok and checked == DEFAULT_TENANT):
        raise error(field, f"tenant ids starting with '_' are reserved "
                                  f"(got {clip(checked)!r})")
    return checked


def destination_label(text: str, *, field: str) -> tuple[str | None, str]:
    """Read a destination as an operator may name it: `NAME` (a live one), `NAME~removed-ID`
    (a removed one, by the name it keeps) or the label metrics and alerts give another
    tenant's, `TENANT~NAME` (`TENANT~NAME~removed-ID` for its removed one).

    Returns:
        (the label's tenant, or None when `text` names none; the destination's name): e.g.
        `acme~billing` -> ("acme", "billing"), `billing~removed-7` -> (None,
        "billing~removed-7"), `_default~_other` -> ("_default", "_other"). A
        `~removed-ID` ending is always the removed mark, never a tenant's destination
        named `removed-ID` (name that one with its tenant given apart).

    Raises:
        InvalidInput(field): `text` holds the mark but is no label: an empty tenant or name,
            a tenant that is no tenant id, or a name holding the mark again.
    """
    removed = REMOVED_SUFFIX_RE.search(text)
    head = text if removed is None else text[:removed.start()]
    tenant, mark, name = head.partition(LABEL_MARK)
    if not mark:
        return None, text
    if not name or LABEL_MARK in name or EVENT_ID_RE.fullmatch(tenant) is None:
        raise InvalidInput(field, f"{clip(text)!r} is neither a destination name nor a "
                                  f"destination label TENANT{LABEL_MARK}NAME (as metrics and "
                                  "alerts name another tenant's destination)")
    return tenant, name + (removed.group() if removed is not None else "")


def tenant_fields(body: Any) -> TenantFields:
    """Check a `PUT /v1/admin/tenants/{id}` body (an object of TENANT_FIELDS).

    Raises:
        InvalidInput: naming the field at fault.
    """
    if not isinstance(body, dict):
        raise InvalidInput("body", "must be a JSON object")
    refuse_unknown(body, TENANT_FIELDS)
    name = body.get("name")
    if name is not None and (not isinstance(name, str) or len(name) > MAX_TENANT_NAME_CHARS
                             or not name.isprintable()):
        raise InvalidInput("name", f"must be printable text of at most "
                                   f"{MAX_TENANT_NAME_CHARS} characters")
    metadata = body.get("metadata")
    encoded = None
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise InvalidInput("metadata", "must be a JSON object")
        encoded = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False)
        if len(encoded.encode()) > MAX_METADATA_BYTES:
            raise InvalidInput("metadata", f"must be at most {MAX_METADATA_BYTES} bytes as JSON")
    limit = body.get("max_destinations")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or not 0 <= limit <= 1_000_000):
        raise InvalidInput("max_destinations", "must be a whole number from 0 to 1000000, "
                                               "or null for no limit")
    disabled = body.get("disabled")
    if disabled is not None and not isinstance(disabled, bool):
        raise InvalidInput("disabled", "must be true or false")
    adopt = body.get("adopt_history", False)
    if not isinstance(adopt, bool):
        raise InvalidInput("adopt_history", "must be true or false")
    return TenantFields(name=name, metadata=encoded, max_destinations=limit,
                        clear_max_destinations="max_destinations" in body and limit is None,
                        disabled=disabled, adopt_history=adopt)
