"""The destination label, `TENANT~NAME`: what /metrics and the alerts call another tenant's
destination, read back as its tenant and name (shared/tenant_models.py)."""

from __future__ import annotations

import pytest

from hookline.shared.errors import InvalidInput
from hookline.shared.store.figures_tx import OTHER, series_name
from hookline.shared.tenant_models import destination_label


@pytest.mark.parametrize(("tenant", "name"), [
    ("acme", "billing"), ("_default", OTHER), ("a:b-c_d", "name with spaces.and/dots"),
    ("acme", "removed")])
def test_a_series_name_reads_back_as_its_tenant_and_name(tenant, name):
    """Every label /metrics writes for another tenant's destination (and the default
    tenant's `_other`) reads back as that tenant and name."""
    label = series_name({"tenant_id": tenant, "name": name})
    assert destination_label(label, field="name") == (tenant, name)


@pytest.mark.parametrize(("text", "read"), [
    ("billing", (None, "billing")),
    ("billing~removed-7", (None, "billing~removed-7")),
    ("acme~billing~removed-7", ("acme", "billing~removed-7")),
    ("acme~removed-7", (None, "acme~removed-7")),
])
def test_a_removed_destinations_name_is_not_taken_for_a_tenant(text, read):
    """`NAME~removed-ID` stays one name (of the tenant given apart); with a tenant before it,
    that tenant's removed destination."""
    assert destination_label(text, field="name") == read


@pytest.mark.parametrize("text", ["~billing", "acme~", "acme~bill~ing", "no such~billing",
                                  "acme~billing~removed-x"])
def test_a_malformed_label_is_refused_naming_the_field(text):
    with pytest.raises(InvalidInput, match=r"^destination: .* is neither a destination name "
                                           r"nor a destination label TENANT~NAME"):
        destination_label(text, field="destination")
