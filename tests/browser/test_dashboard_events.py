"""The dashboard's Events view and job actions, in headless Chromium against a real service:
finding an event by each form of reference (and a miss naming the forms tried), filtering and
paging events, resending a delivered job and retrying a waiting one now (both reach the
receiver), a bulk resend after its dry run, and a dead letter that cannot be replayed.

The tests share one `hookline serve`, one receiver process and one signed-in tab
(tests/browser/conftest.py); each uses destinations of its own. Set-up goes through the admin
API and ingest, every checked action through the page.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hookline.shared.signing import generate_secret
from tests.browser.support import INGEST_TOKEN, Hookline, ReceiverProcess, check_two_pages

SECRET = generate_secret()
ENDPOINTS = ("shop", "stock", "restock", "bulk", "later")
HOUR_S = 3600


def _expect() -> Any:
    from playwright.sync_api import expect  # only once Chromium is there

    return expect


@pytest.fixture(scope="module")
def receiver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReceiverProcess]:
    """One receiver for the module: every endpoint answers 200, except `later`, whose first
    attempt per webhook-id gets 429 with `Retry-After: 3600` (a next run an hour away)."""
    process = ReceiverProcess(tmp_path_factory.mktemp("receiver") / "receiver.log")
    process.start(*(f"{name}={SECRET}:{'retry_after:3600' if name == 'later' else 'ok'}"
                    for name in ENDPOINTS))
    yield process
    process.stop()


def _wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def _requests(receiver: ReceiverProcess, endpoint: str) -> int:
    return int(receiver.summary()["endpoints"][endpoint]["requests"])


def _job(hookline: Hookline, job_id: int) -> dict[str, Any]:
    status, job = hookline.call("GET", f"/v1/admin/jobs/{job_id}")
    assert status == 200, job
    return dict(job)


def _delivered(hookline: Hookline, receiver: ReceiverProcess, name: str, type_: str,
               count: int) -> list[tuple[int, int]]:
    """Add destination `name` (the receiver's endpoint of that name, for `type_`), post
    `count` events of `type_` and wait until each is delivered; [(event id, job id)], oldest
    first."""
    hookline.add_destination(name, receiver.url(name), SECRET, type_)
    made = []
    for n in range(count):
        event_id = hookline.post_event(f"{name}-{n}", type_, {"n": n})
        made.append((event_id, hookline.job_of_event(event_id)))
    _wait_for(lambda: all(_job(hookline, j)["status"] == "done" for _, j in made),
              f"the deliveries to {name}")
    return made


def _audit_lines(hookline: Hookline, event: str) -> list[dict[str, Any]]:
    """The JSON log lines of `event` the service has written so far."""
    lines = []
    for text in Path(hookline.service.log_path).read_text(errors="replace").splitlines():
        if f'"{event}"' in text:
            try:
                lines.append(json.loads(text[text.index("{"):]))
            except ValueError:
                continue
    return lines


def test_an_event_is_found_by_each_form_of_reference_and_a_miss_names_them(
        shared_page: Any, hookline: Hookline, receiver: ReceiverProcess,
        screenshots: Path) -> None:
    """The search box opens an event by its internal id, its webhook-id and the sender's id
    (with its source), showing its facts and its job; a reference matching nothing says so,
    naming every form it was tried as, and is not asked for again."""
    expect, page = _expect(), shared_page
    [(event_id, job_id)] = _delivered(hookline, receiver, "shop", "order.created", 1)
    message_id = hookline.call("GET", f"/v1/admin/events/{event_id}")[1]["message_id"]
    assert message_id.startswith("msg_")

    page.click("#nav a[data-view=events]")
    for ref, source, found_by in ((str(event_id), "", "its internal id"),
                                  (message_id, "", "its webhook-id"),
                                  ("shop-0", "api", "the sender's id")):
        page.fill("#event-ref", ref)
        page.fill("#event-source", source)
        page.click("#event-search-go")
        facts = page.locator("#event-facts")
        expect(facts).to_contain_text(found_by)
        expect(facts).to_contain_text(message_id)
        expect(facts).to_contain_text("api / shop-0")
        job_row = page.locator(f"#event-jobs tr[data-job='{job_id}']")
        expect(job_row).to_contain_text("shop")
        expect(job_row.locator("[data-col=status]")).to_have_text("done")
    page.screenshot(path=str(screenshots / "event.png"), full_page=True)

    job_row.locator(f"a[href='#/jobs/{job_id}']").click()
    expect(page.locator("#job-status")).to_have_text("done")

    missing = "987654321"
    page.goto(f"{hookline.base_url}/#/events")
    page.fill("#event-ref", missing)
    page.click("#event-search-go")
    expect(page.locator("#event-missing")).to_have_text(
        f"Nothing matched: no event with internal id {missing} or sender's id '{missing}' "
        "from source 'api' in any tenant.")
    asked: list[str] = []

    def count(request: Any) -> None:
        if f"/events/{missing}" in request.url:
            asked.append(request.url)

    page.on("request", count)
    try:
        page.wait_for_timeout(2500)  # over a poll interval: a page still polling asks again
    finally:
        page.remove_listener("request", count)
    assert asked == []


def test_events_are_filtered_and_paged(shared_page: Any, hookline: Hookline,
                                       receiver: ReceiverProcess) -> None:
    """The filters (destination, job status, type, time range) narrow the list, newest first;
    Older pages through `next_before` until there is no older page, Newest goes back."""
    expect, page = _expect(), shared_page
    before_all = time.time() - 1
    made = _delivered(hookline, receiver, "stock", "stock.counted", 3)
    newest_first = [str(e) for e, _ in reversed(made)]

    page.goto(f"{hookline.base_url}/#/events?limit=2")
    page.select_option("#events-destination", "stock")
    page.select_option("#events-status", "done")
    page.fill("#events-type", "stock.counted")
    page.fill("#events-since", "1h")
    page.click("#events-apply")
    rows = page.locator("#events-table tbody tr")
    check_two_pages(page, rows, "events", "r.dataset.event", newest_first)
    expect(rows.first.locator("[data-col=jobs]")).to_contain_text("stock")

    rows.first.locator(f"[data-job='{made[-1][1]}'] a").click()  # a row links to its job
    expect(page.locator("#job-status")).to_have_text("done")

    page.goto(f"{hookline.base_url}/#/events?destination=stock&status=dead")
    expect(page.locator("#events-empty")).to_have_text("No event matches.")
    page.goto(f"{hookline.base_url}/#/events?destination=stock&until={before_all:.0f}")
    expect(page.locator("#events-empty")).to_have_text("No event matches.")
    page.goto(f"{hookline.base_url}/#/events?since=yesterday-ish")
    expect(page.locator("#events-error")).to_contain_text("since")


def test_the_destination_picker_names_each_tenants_destination(
        shared_page: Any, hookline: Hookline, receiver: ReceiverProcess) -> None:
    """The default tenant, acme and globex each have a destination `ledger`: the picker
    offers each with its tenant, and picking acme's filters to acme's events (the address
    says tenant=acme), never another tenant's `ledger`."""
    expect, page = _expect(), shared_page
    for owner in ("_default", "acme", "globex"):
        if owner != "_default":
            status, out = hookline.call("PUT", f"/v1/admin/tenants/{owner}", {})
            assert status in (200, 201), out
        status, out = hookline.call("POST", "/v1/admin/destinations", {
            "name": "ledger", "url": receiver.url("stock"), "secret": generate_secret(),
            "event_types": ["ledger.*"], "tenant": owner})
        assert status == 201, out
        status, out = hookline.call("POST", f"/v1/admin/destinations/ledger/pause?tenant={owner}",
                                    {"reason": "listing only"})
        assert status == 200, out
        body = {"id": f"{owner}-ledger", "type": "ledger.closed", "data": {},
                **({} if owner == "_default" else {"tenant": owner})}
        status, out = hookline.call("POST", "/v1/events", body, token=INGEST_TOKEN)
        assert status == 202, out

    page.goto(f"{hookline.base_url}/#/events")
    page.select_option("#events-destination", label="ledger (acme)")
    # The page polls every 2 s: a poll must not undo a pick that is not applied yet.
    polled = page.locator("#live").text_content()
    expect(page.locator("#live")).not_to_have_text(polled or "", timeout=6000)
    expect(page.locator("#events-destination")).to_have_value("acme~ledger")
    page.click("#events-apply")
    rows = page.locator("#events-table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("[data-col=tenant]")).to_have_text("acme")
    assert "tenant=acme" in page.url and "destination=ledger" in page.url
    expect(page.locator("#events-destination")).to_have_value("acme~ledger")


def test_resend_of_a_delivered_job_reaches_the_receiver_again(
        shared_page: Any, hookline: Hookline, receiver: ReceiverProcess) -> None:
    """Resend explains that it repeats the webhook-id and body, then sends the delivered job
    once more; the audit line names the dashboard and the reason."""
    expect, page = _expect(), shared_page
    [(_, job_id)] = _delivered(hookline, receiver, "restock", "restock.made", 1)
    assert _requests(receiver, "restock") == 1

    page.goto(f"{hookline.base_url}/#/jobs/{job_id}")
    expect(page.locator("#job-status")).to_have_text("done")
    expect(page.locator("#job-retry-now")).to_have_count(0)
    page.click("#job-resend")
    expect(page.locator("#job-action-text")).to_contain_text("same webhook-id")
    expect(page.locator("#job-action-text")).to_contain_text("ignores it unless it accepts")
    page.fill("#job-action-reason", "customer lost it")
    page.press("#job-action-reason", "Enter")  # the same as clicking Resend
    expect(page.locator("#job-action-result")).to_contain_text("Resent")
    _wait_for(lambda: _requests(receiver, "restock") == 2, "the resent delivery")
    assert receiver.summary()["endpoints"]["restock"]["duplicates"] == 1  # same webhook-id
    expect(page.locator("#job-status")).to_have_text("done")
    expect(page.locator("#attempts tbody tr")).to_have_count(2)
    [line] = [a for a in _audit_lines(hookline, "jobs_resent")
              if a.get("filters", {}).get("job_id") == job_id]
    assert (line["actor"], line["reason"], line["count"]) == ("dashboard", "customer lost it", 1)


def test_retry_now_sends_a_job_waiting_an_hour_at_once(
        shared_page: Any, hookline: Hookline, receiver: ReceiverProcess) -> None:
    """A job told to come back in an hour (Retry-After) shows "in 60 min" on its event and
    job pages; Retry now sends it at once."""
    expect, page = _expect(), shared_page
    hookline.add_destination("later", receiver.url("later"), SECRET, "later.*")
    event_id = hookline.post_event("later-0", "later.due", {})
    job_id = hookline.job_of_event(event_id)
    _wait_for(lambda: _job(hookline, job_id)["attempts_in_budget"] == 1
              and _job(hookline, job_id)["status"] == "pending", "the first, refused attempt")
    assert _job(hookline, job_id)["run_at"] > time.time() + HOUR_S - 60

    page.goto(f"{hookline.base_url}/#/events/{event_id}")
    job_row = page.locator(f"#event-jobs tr[data-job='{job_id}']")
    expect(job_row.locator("[data-col=next_run]")).to_have_text(re.compile(r"^in (59|60) min$"))
    page.goto(f"{hookline.base_url}/#/jobs/{job_id}")
    expect(page.locator("#job-next-run")).to_have_text(re.compile(r"^in (59|60) min$"))
    expect(page.locator("#job-resend")).to_have_count(0)
    page.click("#job-retry-now")
    expect(page.locator("#job-action-text")).to_contain_text("attempt count is kept")
    page.click("#job-action-go")
    expect(page.locator("#job-action-result")).to_contain_text("due now")
    _wait_for(lambda: _requests(receiver, "later") == 2, "the retried attempt")
    expect(page.locator("#job-status")).to_have_text("done")
    [line] = [a for a in _audit_lines(hookline, "jobs_retried_now")
              if a.get("filters", {}).get("job_id") == job_id]
    assert (line["actor"], line["reason"], line["count"]) == ("dashboard", None, 1)


def test_bulk_resend_shows_a_dry_run_count_before_it_runs(
        shared_page: Any, hookline: Hookline, receiver: ReceiverProcess,
        screenshots: Path) -> None:
    """Resend / retry now matching jobs of a destination counts them with a dry run (nothing
    is sent), then the confirmed run sends each once more."""
    expect, page = _expect(), shared_page
    jobs = [job for _, job in _delivered(hookline, receiver, "bulk", "bulk.made", 3)]
    sent = _requests(receiver, "bulk")

    page.goto(f"{hookline.base_url}/#/events")
    expect(page.locator("#bulk-open")).to_be_disabled()  # a destination first
    page.select_option("#events-destination", "bulk")
    page.fill("#events-since", "1h")
    page.click("#events-apply")
    expect(page.locator("#events-table tbody tr")).to_have_count(3)
    page.click("#bulk-open")
    page.select_option("#bulk-action", "retry-now")
    page.click("#bulk-dry-run")
    expect(page.locator("#bulk-count")).to_contain_text("0 jobs of bulk would be made due now")
    expect(page.locator("#bulk-go")).to_be_disabled()

    page.select_option("#bulk-action", "resend-done")
    page.fill("#bulk-reason", "receiver restored from backup")
    page.click("#bulk-dry-run")
    expect(page.locator("#bulk-count")).to_have_text(
        "Dry run: 3 jobs of bulk would be resent (first: "
        f"{', '.join(f'#{j}' for j in jobs)}).")
    page.wait_for_timeout(300)
    assert _requests(receiver, "bulk") == sent  # a dry run sends nothing
    page.screenshot(path=str(screenshots / "events-bulk.png"), full_page=True)
    page.click("#bulk-go")
    expect(page.locator("#bulk-result")).to_have_text("Done: 3 jobs of bulk resent.")
    _wait_for(lambda: _requests(receiver, "bulk") == sent + 3, "the three resent deliveries")
    [line] = [a for a in _audit_lines(hookline, "jobs_resent")
              if a.get("filters", {}).get("destination") == "bulk"]
    assert (line["actor"], line["reason"], line["count"], line["filters"]["status"]) == (
        "dashboard", "receiver restored from backup", 3, "done")


def test_a_dead_letter_that_cannot_be_replayed_says_why(
        shared_page: Any, hookline: Hookline, receiver: ReceiverProcess,
        screenshots: Path) -> None:
    """A dead job of a removed destination is marked not replayable with the reason and its
    Replay button is disabled; a resend from its job page is refused with the server's
    reason."""
    expect, page = _expect(), shared_page
    hookline.add_destination("retired", receiver.url("shop"), SECRET, "retired.*")
    assert hookline.call("POST", "/v1/admin/destinations/retired/pause", {})[0] == 200
    job_id = hookline.job_of_event(hookline.post_event("retired-0", "retired.note", {}))
    assert hookline.call("DELETE", "/v1/admin/destinations/retired")[0] == 200

    page.goto(f"{hookline.base_url}/#/dead")
    row = page.locator(f"#dead-list tr[data-job='{job_id}']")
    expect(row.locator("[data-col=replayable]")).to_have_text("no: destination removed")
    button = row.locator("button[data-action=replay]")
    expect(button).to_be_disabled()
    expect(button).to_have_attribute("title", "Cannot be replayed: destination removed")
    expect(row.locator("input[type=checkbox]")).to_be_disabled()
    page.screenshot(path=str(screenshots / "dead-letters-not-replayable.png"), full_page=True)

    page.goto(f"{hookline.base_url}/#/jobs/{job_id}")
    expect(page.locator("#job-status")).to_have_text("dead")
    page.click("#job-resend")
    page.click("#job-action-go")
    expect(page.locator("#job-action-error")).to_have_text(
        f"Refused: job {job_id} cannot be resent: its destination was removed")


def test_a_picked_destination_its_tenant_lacks_is_said_in_place_of_the_list(
        shared_page: Any, hookline: Hookline, receiver: ReceiverProcess) -> None:
    """Events and Dead letters filtered by `archive`, which only tenant initech has: each
    page says so in place of its list (no empty list, no error in the status line) and links
    to initech's `archive`, which lists its event. Removed while it is picked, the dead
    letters page says it is gone, Replay all is off, and the page keeps refreshing."""
    expect, page = _expect(), shared_page
    status, out = hookline.call("PUT", "/v1/admin/tenants/initech", {})
    assert status in (200, 201), out
    status, out = hookline.call("POST", "/v1/admin/destinations", {
        "name": "archive", "url": receiver.url("stock"), "secret": generate_secret(),
        "event_types": ["archive.*"], "tenant": "initech"})
    assert status == 201, out
    assert hookline.call("POST", "/v1/admin/destinations/archive/pause?tenant=initech",
                         {"reason": "listing only"})[0] == 200
    status, out = hookline.call("POST", "/v1/events", {
        "id": "initech-archive", "type": "archive.closed", "data": {}, "tenant": "initech"},
        token=INGEST_TOKEN)
    assert status == 202, out
    lacking = ("no destination named 'archive' in the default tenant (_default); tenant "
               "initech has one: pass tenant=initech.")

    page.goto(f"{hookline.base_url}/#/events?destination=archive")
    note = page.locator("#events-missing")
    expect(note).to_contain_text(lacking)
    expect(page.locator("#events-table")).to_have_count(0)
    expect(page.locator("#live")).not_to_contain_text("error")
    note.locator("a", has_text="initech").click()
    rows = page.locator("#events-table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("[data-col=tenant]")).to_have_text("initech")
    assert "tenant=initech" in page.url and "destination=archive" in page.url

    page.goto(f"{hookline.base_url}/#/dead?destination=archive")
    expect(page.locator("#dead-missing")).to_contain_text(lacking)
    expect(page.locator("#replay-all")).to_be_disabled()
    page.locator("#dead-missing a", has_text="initech").click()
    expect(page.locator("#dead-list")).to_have_text("No dead jobs.")
    expect(page.locator("#dead-destination")).to_have_value("initech~archive")
    expect(page.locator("#replay-all")).to_be_enabled()

    assert hookline.call("DELETE", "/v1/admin/destinations/archive?tenant=initech")[0] == 200
    expect(page.locator("#dead-missing")).to_contain_text(
        "no destination named 'archive' in tenant initech, nor in any other tenant; one was "
        "removed: its jobs are under 'archive~removed-")
    expect(page.locator("#dead-missing")).to_contain_text("under its removed name")
    expect(page.locator("#dead-destination")).to_have_value("initech~archive")  # still shown
    expect(page.locator("#replay-all")).to_be_disabled()
    expect(page.locator("#live")).to_have_class(re.compile(r"\bok\b"))
    page.select_option("#dead-destination", "")
    expect(page.locator("#dead-missing")).to_have_count(0)


def test_a_sender_id_two_tenants_use_is_found_with_the_tenant_box(
        shared_page: Any, hookline: Hookline) -> None:
    """A sender's id only one tenant has is found without naming it; one that two tenants
    use is refused naming both, and found once the Tenant box names one (in the address
    too, so the page can be linked)."""
    expect, page = _expect(), shared_page
    for tenant in ("umbrella", "wayne"):
        status, out = hookline.call("PUT", f"/v1/admin/tenants/{tenant}", {})
        assert status in (200, 201), out
    ids = {}
    for tenant, event_id in (("umbrella", "twice-used"), ("wayne", "twice-used"),
                             ("wayne", "once-used")):
        status, out = hookline.call("POST", "/v1/events", {
            "id": event_id, "type": "tenant.note", "data": {}, "tenant": tenant},
            token=INGEST_TOKEN)
        assert status == 202, out
        ids[tenant, event_id] = out["event_id"]

    page.goto(f"{hookline.base_url}/#/events/once-used")
    expect(page.locator("#event-facts")).to_contain_text(f"#{ids['wayne', 'once-used']}")

    page.goto(f"{hookline.base_url}/#/events")
    page.fill("#event-ref", "twice-used")
    page.click("#event-search-go")
    expect(page.locator("#event-missing")).to_contain_text(
        "tenants umbrella and wayne have one: name the tenant")
    page.fill("#event-tenant", "wayne")
    page.click("#event-search-go")
    expect(page.locator("#event-facts")).to_contain_text(f"#{ids['wayne', 'twice-used']}")
    assert "tenant=wayne" in page.url


def test_the_list_filter_and_the_lookup_each_have_their_own_tenant_label(
        shared_page: Any, hookline: Hookline) -> None:
    """The Events page has two tenant boxes: the list's filter ("Tenant", in the "Filter
    events" form) and Find event's ("Find in tenant", in the "Find an event" form). Each is
    found by its own label alone, and each does its own job: the filter lists only that
    tenant's events, the lookup finds the sender's id of that tenant."""
    expect, page = _expect(), shared_page
    ids = {}
    for tenant in ("stark", "oscorp"):
        status, out = hookline.call("PUT", f"/v1/admin/tenants/{tenant}", {})
        assert status in (200, 201), out
        status, out = hookline.call("POST", "/v1/events", {
            "id": "shared-label-id", "type": "label.note", "data": {}, "tenant": tenant},
            token=INGEST_TOKEN)
        assert status == 202, out
        ids[tenant] = out["event_id"]

    page.goto(f"{hookline.base_url}/#/events")
    list_tenant = page.get_by_label("Tenant", exact=True)
    lookup_tenant = page.get_by_label("Find in tenant", exact=True)
    expect(list_tenant).to_have_count(1)
    expect(lookup_tenant).to_have_count(1)
    expect(list_tenant).to_have_id("events-tenant")
    expect(lookup_tenant).to_have_id("event-tenant")
    filters = page.get_by_role("form", name="Filter events")
    lookup = page.get_by_role("form", name="Find an event")
    expect(filters.get_by_label("Tenant", exact=True)).to_have_id("events-tenant")
    expect(lookup.get_by_label("Find in tenant", exact=True)).to_have_id("event-tenant")

    list_tenant.fill("oscorp")
    page.click("#events-apply")
    rows = page.locator("#events-table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-event", str(ids["oscorp"]))
    expect(rows.first.locator("[data-col=tenant]")).to_have_text("oscorp")
    assert "tenant=oscorp" in page.url

    lookup.get_by_label("Find event", exact=True).fill("shared-label-id")
    page.get_by_label("Find in tenant", exact=True).fill("stark")
    page.click("#event-search-go")
    expect(page.locator("#event-facts")).to_contain_text(f"#{ids['stark']}")
    assert "tenant=stark" in page.url
