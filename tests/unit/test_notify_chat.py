"""The Slack-format text of operational events (shared/policy/notify.py chat_body): full
figures read as a sentence, and a figure the data lacks (a test delivery of an operational
type carries example data) is left out, never printed as Python's `None`."""

from __future__ import annotations

import json

import pytest

from hookline.shared.policy import notify


def chat(event_type: str, data: dict[str, object]) -> str:
    body = notify.event_body("e1", event_type, 0.0, data)
    return str(json.loads(notify.chat_body(body))["text"])


def test_full_figures_make_the_sentence():
    text = chat(notify.FAILING, {"destination": "billing", "failure_streak": 5,
                                 "failing_since": "2026-01-01T00:00:00.000Z",
                                 "last_status_code": 503})
    assert text == (":warning: hookline destination `billing` is failing: 5 failed attempts "
                    "in a row since 2026-01-01T00:00:00.000Z, last HTTP 503")
    assert chat(notify.DEAD_LETTERS_GROWING, {"destination": "b", "new_dead_letters": 10,
                                              "dead_letters": 12}) == (
        ":skull: hookline destination `b`: 10 new dead letters (12 in all)")


@pytest.mark.parametrize("event_type", notify.TYPES)
@pytest.mark.parametrize("data", [{}, {"destination": "billing"}], ids=["empty", "name only"])
def test_missing_figures_are_left_out(event_type: str, data: dict[str, object]):
    text = chat(event_type, data)
    assert "None" not in text, text
    assert text.startswith(":"), text


def test_the_link_is_the_dashboards_for_the_operator_and_the_portals_for_a_tenant():
    """The operator's copy links the dashboard; a tenant's own copy has only the portal."""
    data = {"destination": "billing", "tenant": "acme"}
    operator = chat(notify.RECOVERED, {**data, "dashboard_url": "https://h.example/#/d",
                                       "portal_url": "https://h.example/portal/"})
    assert operator.endswith("<https://h.example/#/d|dashboard>")
    tenant = chat(notify.RECOVERED, {**data, "portal_url": "https://h.example/portal/"})
    assert tenant == (":white_check_mark: hookline destination `billing` (tenant `acme`) "
                      "delivers again <https://h.example/portal/|portal>")
