"""The "did you mean" of a subscription no catalogue type matches (shared/catalogue.py
nearest_name): case is ignored when choosing, and the catalogue's own spelling is returned."""

from __future__ import annotations

import pytest

from hookline.shared.catalogue import nearest_name

KNOWN = ["invoice.paid", "invoice.voided", "user.created"]


@pytest.mark.parametrize(("typed", "nearest"), [
    ("INVOICE.PAID", "invoice.paid"),
    ("Invoice.Payed", "invoice.paid"),
    ("USER.CREATED.*", "user.created"),
    ("invoices.paid", "invoice.paid"),
    ("shipment.sent", None),
])
def test_the_nearest_name_ignores_case(typed: str, nearest: str | None):
    assert nearest_name(typed, KNOWN) == nearest
