"""The dashboard acting, in headless Chromium against a real service: adding, editing and
removing destinations and sources through its forms (server refusals shown at the form), the
failing badge, success rate and failed-attempts chart of a destination that refuses
connections, "due now" for a waiting job, and a missing job that stops being polled.

The tests share one `hookline serve` and one signed-in tab (tests/browser/conftest.py); each
uses destinations and sources of its own. Set-up goes
through the admin API, every checked action through the page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.browser.support import Hookline

REFUSING_URL = "http://127.0.0.1:9/{}"  # nothing listens on the discard port: refused at once


def _expect() -> Any:
    from playwright.sync_api import expect  # only once Chromium is there

    return expect


def _destination(hookline: Hookline, name: str) -> dict[str, Any]:
    status, out = hookline.call("GET", f"/v1/admin/destinations/{name}")
    assert status == 200, out
    return dict(out)


def test_destinations_are_added_edited_and_removed_from_the_page(
        shared_page: Any, hookline: Hookline, screenshots: Path) -> None:
    """The add form sets every field and shows the generated secret once; a refused value is
    shown at the form with its field marked; editing changes only what was changed; removing
    says what happens to unfinished jobs first, then ends them dead."""
    expect, page = _expect(), shared_page
    page.click("#nav a[data-view=destinations]")
    page.click("#add-destination")
    page.fill("#destination-name", "orders")
    page.fill("#destination-url", REFUSING_URL.format("orders"))
    page.fill("#destination-event_types", "order.*, refund.created")
    page.fill("#destination-max_in_flight", "3")
    page.fill("#destination-timeout_s", "5")
    page.fill("#destination-rate_limit_per_s", "2.5")
    page.check("#destination-ordered")
    page.fill("#destination-headers", "X-Team: payments\nX-Api-Key: k-123")
    page.screenshot(path=str(screenshots / "destination-form.png"), full_page=True)
    page.click("#destination-save")
    expect(page.locator("#new-secret")).to_have_text(re.compile(r"^whsec_\S{20,}$"))
    expect(page.locator("#destination-form")).to_be_hidden()
    row = page.locator("tr[data-destination=orders]")
    expect(row.locator("[data-col=state]")).to_have_text("active")
    stored = _destination(hookline, "orders")
    assert page.locator("#new-secret").text_content().startswith(stored["secret"].rstrip("…"))
    assert (stored["url"], stored["event_types"], stored["max_in_flight"]) == (
        REFUSING_URL.format("orders"), ["order.*", "refund.created"], 3)
    assert (stored["timeout_s"], stored["rate_limit_per_s"], bool(stored["ordered"])) == (
        5, 2.5, True)
    assert stored["headers"] == {"X-Team": "***", "X-Api-Key": "***"}
    page.click("#new-secret-done")
    expect(page.locator("#new-secret")).to_have_count(0)

    page.click("#add-destination")  # a value the server refuses: shown at the form
    page.fill("#destination-name", "orders-2")
    page.fill("#destination-url", REFUSING_URL.format("orders-2"))
    page.fill("#destination-max_in_flight", "0")
    page.click("#destination-save")
    expect(page.locator("#destination-form-error")).to_contain_text("max_in_flight: must be")
    expect(page.locator("#destination-max_in_flight")).to_have_attribute("aria-invalid", "true")
    page.click("#destination-cancel")
    assert hookline.call("GET", "/v1/admin/destinations/orders-2")[0] == 404

    row.locator("button[data-action=edit]").click()
    expect(page.locator("#destination-url")).to_have_value(REFUSING_URL.format("orders"))
    expect(page.locator("#destination-headers")).to_have_value("X-Team: ***\nX-Api-Key: ***")
    page.fill("#destination-headers", "X-Team: ***")  # changed, without the value: refused
    page.click("#destination-save")
    expect(page.locator("#destination-form-error")).to_contain_text("value of X-Team")
    page.fill("#destination-headers", "X-Team: ***\nX-Api-Key: ***")  # back as shown: unchanged
    page.fill("#destination-url", REFUSING_URL.format("orders-v2"))
    page.fill("#destination-event_types", "order.*")
    page.fill("#destination-timeout_s", "")
    page.uncheck("#destination-ordered")
    page.click("#destination-save")
    expect(page.locator("#destination-form")).to_be_hidden()
    stored = _destination(hookline, "orders")
    assert (stored["url"], stored["event_types"], stored["timeout_s"], bool(stored["ordered"])) \
        == (REFUSING_URL.format("orders-v2"), ["order.*"], None, False)
    assert (stored["rate_limit_per_s"], stored["max_in_flight"]) == (2.5, 3)
    assert stored["headers"] == {"X-Team": "***", "X-Api-Key": "***"}

    assert hookline.call("POST", "/v1/admin/destinations/orders/pause", {})[0] == 200
    job_id = hookline.job_of_event(hookline.post_event("order-1", "order.created", {}))
    expect(row.locator("[data-col=pending]")).to_have_text("1")
    row.locator("button[data-action=remove]").click()
    expect(page.locator("#remove-text")).to_contain_text("(1 pending, 0 in flight now)")
    expect(page.locator("#remove-text")).to_contain_text('"destination removed"')
    page.click("#remove-go")
    expect(row).to_have_count(0)
    status, job = hookline.call("GET", f"/v1/admin/jobs/{job_id}")
    assert (status, job["status"], job["last_error"]) == (200, "dead", "destination removed")


def test_sources_are_added_and_removed_from_the_page(shared_page: Any, hookline: Hookline,
                                                     screenshots: Path) -> None:
    """A source is added with its scheme and a given secret, or a generated one shown once;
    a bad name is refused at the form; removal is confirmed first."""
    expect, page = _expect(), shared_page
    page.click("#nav a[data-view=sources]")
    page.click("#add-source")
    page.fill("#source-name", "gh")
    page.select_option("#source-scheme", "github")
    page.fill("#source-secret-input", "a-github-webhook-secret")
    page.click("#source-save")
    row = page.locator("tr[data-source=gh]")
    expect(row).to_contain_text("github")
    expect(page.locator("#new-secret")).to_have_count(0)  # it was given: nothing to show

    page.click("#add-source")
    page.fill("#source-name", "bad name!")
    page.click("#source-save")
    expect(page.locator("#source-form-error")).to_contain_text("name: must be")
    expect(page.locator("#source-name")).to_have_attribute("aria-invalid", "true")
    page.fill("#source-name", "partner")
    page.select_option("#source-scheme", "standard")
    page.click("#source-save")
    expect(page.locator("tr[data-source=partner]")).to_contain_text("standard")
    expect(page.locator("#new-secret")).to_have_text(re.compile(r"^whsec_\S{20,}$"))

    row.locator("button[data-action=remove]").click()
    expect(page.locator("#remove-text")).to_contain_text("/v1/sources/gh are refused (404)")
    page.screenshot(path=str(screenshots / "sources.png"), full_page=True)
    page.click("#remove-go")
    expect(row).to_have_count(0)
    status, sources = hookline.call("GET", "/v1/admin/sources")
    assert status == 200 and [s["name"] for s in sources] == ["partner"]


def test_failing_destination_is_badged_and_its_failures_are_charted(
        shared_page: Any, hookline: Hookline, screenshots: Path) -> None:
    """A destination whose attempts fail wears "failing · N in a row" and a 0 % success rate,
    its retried job says when it runs next ("in ..."), and the overview's chart and card
    count the failed attempts."""
    expect, page = _expect(), shared_page
    hookline.call("POST", "/v1/admin/destinations", {
        "name": "ledger", "url": REFUSING_URL.format("ledger"), "event_types": ["ledger.*"]})
    job_id = hookline.job_of_event(hookline.post_event("ledger-1", "ledger.posted", {}))

    page.click("#nav a[data-view=destinations]")
    row = page.locator("tr[data-destination=ledger]")
    expect(row.locator("[data-col=state] .badge")).to_have_text(
        re.compile(r"^failing · \d+ in a row$"))
    expect(row.locator("[data-col=success]")).to_have_text("0.0 %")
    page.screenshot(path=str(screenshots / "destinations-failing.png"), full_page=True)

    page.goto(f"{hookline.base_url}/#/jobs/{job_id}")
    expect(page.locator("#job-next-run")).to_have_text(re.compile(r"^in \d"))

    page.click("#nav a[data-view=overview]")
    dots = page.locator("#throughput-chart circle.line-failed")
    expect(page.locator("#throughput-chart polyline.line-failed")).to_have_count(1)
    expect(dots.last).to_be_attached()
    counts = [int(n) for n in dots.evaluate_all("els => els.map(e => e.dataset.count)")]
    assert sum(counts) >= 1
    expect(page.locator("[data-card=failed-per-minute]")).to_be_visible()


def test_waiting_job_is_due_now_and_a_missing_job_stops_polling(
        shared_page: Any, hookline: Hookline) -> None:
    """A pending job whose time has come says "due now" (not "0 ms ago"); an unknown job id
    says so and is not asked for again."""
    expect, page = _expect(), shared_page
    hookline.call("POST", "/v1/admin/destinations", {
        "name": "held", "url": REFUSING_URL.format("held"), "event_types": ["held.*"]})
    assert hookline.call("POST", "/v1/admin/destinations/held/pause", {})[0] == 200
    job_id = hookline.job_of_event(hookline.post_event("held-1", "held.created", {}))
    page.goto(f"{hookline.base_url}/#/jobs/{job_id}")
    expect(page.locator("#job-status")).to_have_text("pending")
    expect(page.locator("#job-next-run")).to_have_text("due now")

    missing = 987654321
    asked: list[str] = []

    def count(request: Any) -> None:
        if request.url.endswith(f"/v1/admin/jobs/{missing}"):
            asked.append(request.url)

    page.on("request", count)
    try:
        page.goto(f"{hookline.base_url}/#/jobs/{missing}")
        expect(page.locator("#job-missing")).to_contain_text(f"No job {missing}")
        # Over a poll interval (2 s): a page still polling asks again. (Waiting through
        # Playwright, not time.sleep, so the request events are delivered meanwhile.)
        page.wait_for_timeout(2500)
        assert len(asked) == 1, asked
    finally:
        page.remove_listener("request", count)
