"""The dashboard acting, in headless Chromium against a real service: adding, editing and
removing destinations and sources through its forms (server refusals shown at the form), the
failing badge, success rate and failed-attempts chart of a destination that refuses
connections, "due now" for a waiting job, a missing job that stops being polled, a
destination's secret rotated, revealed and expired (deliveries verified with
`standardwebhooks`), and the processes panel counting a killed worker's restart.

The tests share one `hookline serve` and one signed-in tab (tests/browser/conftest.py); each
uses destinations and sources of its own. Set-up goes
through the admin API, every checked action through the page.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hookline.shared.process.lifecycle import STATUS_FILE
from hookline.shared.signing import generate_secret
from tests.browser.support import Hookline
from tests.recording import recording_handler, verifies

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


def test_event_types_are_shown_archived_and_removed_from_the_page(
        shared_page: Any, hookline: Hookline, screenshots: Path) -> None:
    """The catalogue page lists a type with its latest version and mode, shows its schemas
    and example as text, archives and restores it, and removes it after a confirmation (the
    catalogue is emptied again: the module's other tests subscribe freely)."""
    expect, page = _expect(), shared_page
    schema = {"type": "object", "properties": {"amount": {"type": "integer"}}}
    status, out = hookline.call("PUT", "/v1/admin/event-types/invoice.paid", {
        "description": "An invoice was paid", "schemas": {"1": schema, "2": schema},
        "examples": {"2": {"amount": 5}}, "validation": "warn", "deprecated": True})
    assert status == 201, out
    try:
        page.click("#nav a[data-view=event-types]")
        row = page.locator("tr[data-event-type='invoice.paid']")
        expect(row).to_contain_text("An invoice was paid")
        expect(row.locator("[data-col=validation]")).to_have_text("warn")
        expect(row).to_contain_text("deprecated")
        row.locator("button[data-action=schemas]").click()
        expect(page.locator("#event-type-detail [data-version='2']")).to_contain_text(
            '"amount": 5')
        page.screenshot(path=str(screenshots / "event-types.png"), full_page=True)
        row.locator("button[data-action=archive]").click()
        expect(row).to_contain_text("archived")
        row.locator("button[data-action=restore]").click()
        expect(row.locator("button[data-action=archive]")).to_have_count(1)
        row.locator("button[data-action=remove]").click()
        expect(page.locator("#event-type-remove-text")).to_contain_text("Remove invoice.paid")
        page.click("#event-type-remove-go")
        expect(row).to_have_count(0)
    finally:
        hookline.call("DELETE", "/v1/admin/event-types/invoice.paid")
    status, listed = hookline.call("GET", "/v1/admin/event-types")
    assert status == 200 and listed["event_types"] == []


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


_Recorder = recording_handler()
"""Answers 200 and keeps each request's headers and body bytes."""


def _audit_lines(hookline: Hookline, destination: str) -> list[tuple[str, Any, Any]]:
    """(event, actor, generated) of the secret audit lines about `destination` so far."""
    return [(e["event"], e.get("actor"), e.get("generated"))
            for e in hookline.service.log_events()
            if e.get("destination") == destination and e.get("event") in (
                "secret_rotated", "secret_revealed", "previous_secret_expired")]


def _deliver(page: Any, hookline: Hookline, event_id: str) -> tuple[dict[str, str], bytes]:
    """Post a `vault.*` event and wait (through Playwright) until the receiver has it."""
    seen = len(_Recorder.received)
    hookline.post_event(event_id, "vault.opened", {"id": event_id})
    for _ in range(150):
        if len(_Recorder.received) > seen:
            return _Recorder.received[-1]
        page.wait_for_timeout(100)
    raise AssertionError(f"{event_id} was not delivered within 15 s")


def test_secret_is_rotated_revealed_and_expired_from_the_page(
        shared_page: Any, hookline: Hookline, screenshots: Path) -> None:
    """The secret panel rotates to a generated secret (shown once, with the time the previous
    one stops signing) and to a pasted one, refuses an overlap out of bounds at its field,
    marks the row "rotating until", and a delivery during the overlap verifies with both
    secrets; expiring early (confirmed first) leaves only the new one signing; reveal shows
    the current secret. Every audit line says actor dashboard."""
    expect, page = _expect(), shared_page
    _Recorder.received = []
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        original = generate_secret()
        hookline.add_destination("vault", f"http://127.0.0.1:{receiver.server_port}/hook",
                                 original, "vault.*")
        page.click("#nav a[data-view=destinations]")
        row = page.locator("tr[data-destination=vault]")
        expect(row.locator("[data-col=rotation]")).to_have_count(0)
        row.locator("button[data-action=secret]").click()
        expect(page.locator("#secret-state")).to_contain_text("One secret signs")
        expect(page.locator("#expire-previous")).to_be_hidden()

        page.fill("#rotate-overlap", "8d")  # above the 7-day bound: refused at the field
        page.click("#rotate-go")
        expect(page.locator("#rotate-error")).to_contain_text("overlap_s")
        expect(page.locator("#rotate-overlap")).to_have_attribute("aria-invalid", "true")

        page.fill("#rotate-overlap", "2h")  # generated
        page.click("#rotate-go")
        expect(page.locator("#new-secret")).to_have_text(re.compile(r"^whsec_\S{20,}$"))
        generated = page.locator("#new-secret").text_content()
        expect(page.locator("#new-secret-note")).to_contain_text("keeps signing until")
        until = _destination(hookline, "vault")["previous_secret_until"]
        assert 7100 < until - time.time() < 7300
        expect(row.locator("[data-col=rotation]")).to_contain_text("rotating until")
        page.click("#new-secret-done")
        expect(page.locator("#new-secret")).to_have_count(0)

        pasted = generate_secret()  # pasted, default overlap (24 h)
        page.fill("#rotate-secret", pasted)
        page.fill("#rotate-overlap", "")
        page.click("#rotate-go")
        expect(page.locator("#new-secret")).to_have_text(pasted)
        until = _destination(hookline, "vault")["previous_secret_until"]
        assert 86_300 < until - time.time() < 86_500
        expect(page.locator("#expire-previous")).to_be_visible()
        page.screenshot(path=str(screenshots / "destination-secret.png"), full_page=True)
        during = _deliver(page, hookline, "vault-1")
        assert verifies(pasted, during) and verifies(generated, during)
        assert not verifies(original, during)

        page.click("#expire-previous")
        expect(page.locator("#expire-text")).to_contain_text("refuses every request")
        page.click("#expire-go")
        expect(page.locator("#expire-previous")).to_be_hidden()
        expect(row.locator("[data-col=rotation]")).to_have_count(0)
        assert _destination(hookline, "vault")["previous_secret"] is None
        after = _deliver(page, hookline, "vault-2")
        assert verifies(pasted, after) and not verifies(generated, after)

        page.click("#reveal-secret")
        expect(page.locator("#revealed-secret")).to_have_text(pasted)
        expect(page.locator("#secret-shown")).to_contain_text("audit log")
        page.click("#revealed-secret-done")
        expect(page.locator("#revealed-secret")).to_have_count(0)
        page.click("#secret-close")
        expect(page.locator("#secret-panel")).to_be_hidden()
    finally:
        receiver.shutdown()
        receiver.server_close()
    assert _audit_lines(hookline, "vault") == [
        ("secret_rotated", "dashboard", True), ("secret_rotated", "dashboard", False),
        ("previous_secret_expired", "dashboard", None), ("secret_revealed", "dashboard", None)]


def test_processes_panel_counts_a_killed_worker_restart(
        shared_page: Any, hookline: Hookline, screenshots: Path) -> None:
    """The overview's processes panel shows workers alive of wanted and each process's
    figures; a worker killed with SIGKILL (its pid from the supervisor's status.json) shows
    one restart caused by a signal once the supervisor has respawned it."""
    expect, page = _expect(), shared_page
    worker = page.locator("#processes tr[data-slot=worker-1]")
    expect(page.locator("#processes-summary")).to_contain_text("worker: 1 of 1 alive")
    expect(worker.locator("[data-col=state]")).to_have_text("running")
    expect(worker.locator("[data-col=restarts]")).to_have_text("0")
    expect(worker.locator("[data-col=cpu]")).to_have_text(re.compile(r"^\d+\.\d s$"))
    expect(worker.locator("[data-col=memory]")).to_have_text(re.compile(r"MiB$"))
    expect(worker.locator("[data-col=heartbeat]")).not_to_have_text("\u2013")
    expect(page.locator("#processes tr[data-slot=supervisor]")).to_be_visible()

    status_file = Path(f"{hookline.service.db}.run") / STATUS_FILE
    pid = json.loads(status_file.read_text())["slots"]["worker-1"]["pid"]
    os.kill(pid, signal.SIGKILL)
    expect(worker.locator("[data-col=restarts]")).to_have_text("signal 1", timeout=20_000)
    expect(page.locator("#processes-summary")).to_contain_text("worker: 1 of 1 alive",
                                                               timeout=20_000)
    expect(page.locator("#processes-summary")).to_contain_text("restarts: 1")
    expect(worker.locator("[data-col=state]")).to_have_text("running")
    page.locator("#processes").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "processes.png"), full_page=True)
    assert json.loads(status_file.read_text())["slots"]["worker-1"]["pid"] != pid


def test_tenants_page_searches_pages_and_shows_each_tenants_destinations(
        shared_page: Any, hookline: Hookline, screenshots: Path) -> None:
    """The Tenants page finds tenants by id prefix, pages in id order, shows destination counts
    and the disabled state, and lists one tenant's destinations; "Open portal" says so when
    the server has no tenant token route yet. The Destinations page shows each destination's
    tenant, filters by tenant, and pauses the tenant's destination, not the default tenant's
    destination of the same name."""
    expect, page = _expect(), shared_page
    for tenant, body in (("tb-acme", {"name": "Acme Inc"}), ("tb-beta", {"disabled": True}),
                         ("tb-gamma", {})):
        status, out = hookline.call("PUT", f"/v1/admin/tenants/{tenant}", body)
        assert status == 201, out
    for tenant in ("tb-acme", None):  # the same name in acme and in the default tenant
        status, out = hookline.call("POST", "/v1/admin/destinations", {
            "name": "tb-hooks", "url": REFUSING_URL.format("tb-hooks"),
            "event_types": ["never.*"], **({"tenant": tenant} if tenant else {})})
        assert status == 201, out

    page.click("#nav a[data-view=tenants]")
    page.fill("#tenants-prefix", "tb-")
    page.click("#tenants-search-apply")
    rows = page.locator("#tenants-list tr[data-tenant]")
    expect(rows).to_have_count(3)
    acme = page.locator("#tenants-list tr[data-tenant=tb-acme]")
    expect(acme).to_contain_text("Acme Inc")
    expect(acme.locator("[data-col=destinations]")).to_have_text("1")
    expect(page.locator("#tenants-list tr[data-tenant=tb-beta] [data-col=state]")).to_have_text(
        "disabled")
    expect(page.locator("#tenants-next")).to_be_disabled()

    acme.locator("[data-action=destinations]").click()
    panel = page.locator("#tenant-destinations")
    expect(panel.locator("h2")).to_have_text("Destinations of tb-acme")
    expect(panel.locator("tr[data-destination=tb-hooks]")).to_contain_text(
        REFUSING_URL.format("tb-hooks"))
    if os.environ.get("DASHBOARD_SCREENSHOTS"):
        page.screenshot(path=str(screenshots / "tenants.png"))
    with page.context.expect_page() as opened:
        acme.locator("[data-action=portal]").click()
    portal = opened.value
    portal.wait_for_load_state()
    assert "/portal/" in portal.url and "token=" not in portal.url  # the page drops it
    expect(portal.locator("body")).to_contain_text("tb-hooks")
    portal.close()

    page.goto(page.url.split("#")[0] + "#/tenants?prefix=tb-&after=tb-acme")
    expect(rows).to_have_count(2)
    expect(page.locator("#tenants-list tr[data-tenant=tb-acme]")).to_have_count(0)

    page.goto(page.url.split("#")[0] + "#/destinations")
    page.fill("#destinations-tenant", "tb-acme")
    page.click("#destinations-filter-apply")
    listed = page.locator("#destinations tr[data-destination]")
    expect(listed).to_have_count(1)
    theirs = page.locator("#destinations tr[data-tenant=tb-acme][data-destination=tb-hooks]")
    expect(theirs.locator("[data-col=tenant]")).to_have_text("tb-acme")
    theirs.locator("[data-action=pause]").click()
    expect(theirs.locator("[data-col=state]")).to_contain_text("paused")
    assert _destination(hookline, "tb-hooks?tenant=tb-acme")["paused"]
    assert not _destination(hookline, "tb-hooks")["paused"]
