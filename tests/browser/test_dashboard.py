"""The dashboard in headless Chromium against a real service: dead letters and
replay, pause and resume, a hostile payload shown as text, the overview and the token prompt.

Each test uses its own destination (and receiver endpoint), so they do not depend on each
other's order; they share one `hookline serve` and one browser (tests/browser/conftest.py).
Every action goes through the page's buttons, i.e. through the admin API.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from hookline.shared.signing import generate_secret
from tests.browser.support import INGEST_TOKEN, TOKEN, Hookline, ReceiverProcess, check_two_pages

XSS_SCRIPT = "<script>window.__xss=1</script>"
XSS_IMG = "<img src=x onerror=\"window.__xss=2\">"


def _expect() -> Any:
    from playwright.sync_api import expect  # only once Chromium is there

    return expect


def _wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)


def _effects(receiver: ReceiverProcess, endpoint: str) -> int:
    return int(receiver.summary()["endpoints"][endpoint]["effects"])


def _requests(receiver: ReceiverProcess, endpoint: str) -> int:
    return int(receiver.summary()["endpoints"][endpoint]["requests"])


def _destination_with_receiver(hookline: Hookline, receivers: list[ReceiverProcess],
                               tmp_path: Path, name: str, behaviour: str,
                               event_types: str) -> tuple[ReceiverProcess, str]:
    """A receiver process with one endpoint `name` answering as `behaviour` (`ok`,
    `status:400`, ...), and destination `name` to it taking `event_types`; (the receiver,
    its secret)."""
    secret = generate_secret()
    receiver = ReceiverProcess(tmp_path / f"receiver-{name}.log")
    receivers.append(receiver)
    receiver.start(f"{name}={secret}:{behaviour}")
    hookline.add_destination(name, receiver.url(name), secret, event_types)
    return receiver, secret


def test_dead_jobs_appear_and_are_replayed_once_the_receiver_succeeds(
        page: Any, hookline: Hookline, receivers: list[ReceiverProcess], tmp_path: Path,
        screenshots: Path) -> None:
    """A 400 (permanent) makes jobs dead; they show in Dead letters with their error. After
    the receiver is fixed, each way of replaying (one job, the selected ones, all of the
    destination) shows a dry-run count first, then sends; the job page shows it done."""
    expect = _expect()
    receiver, secret = _destination_with_receiver(hookline, receivers, tmp_path, "billing",
                                                  "status:400", "invoice.*")
    first, second, third = (hookline.job_of_event(hookline.post_event(
        f"inv-{n}", "invoice.paid", {"n": n})) for n in range(3))

    page.click("#nav a[data-view=dead]")
    rows = {job: page.locator(f"#dead-list tr[data-job='{job}']")
            for job in (first, second, third)}
    for row in rows.values():
        expect(row).to_be_visible()
        expect(row.locator("[data-col=last_error]")).to_contain_text("HTTP 400")
        expect(row).to_contain_text("billing")
    page.screenshot(path=str(screenshots / "dead-letters.png"), full_page=True)

    receiver.stop()  # the receiver gets fixed: same port, now answering 200
    receiver.start(f"billing={secret}:ok")

    rows[first].locator("button[data-action=replay]").click()  # one job
    expect(page.locator("#confirm-text")).to_contain_text(f"job #{first} would be replayed")
    page.click("#confirm-replay")
    expect(rows[first]).to_have_count(0)

    rows[second].locator("input[type=checkbox]").check()  # the selected ones
    expect(page.locator("#replay-selected")).to_have_text("Replay selected (1)")
    page.click("#replay-selected")
    expect(page.locator("#confirm-text")).to_contain_text("1 of 1 selected job would be replayed")
    page.click("#confirm-replay")
    expect(rows[second]).to_have_count(0)

    page.select_option("#dead-destination", "billing")  # all of a destination
    page.click("#replay-all")
    expect(page.locator("#confirm-text")).to_contain_text("1 dead job of billing would be replayed")
    page.click("#confirm-replay")
    expect(page.locator("#dead-list")).to_have_text("No dead jobs.")
    _wait_for(lambda: _effects(receiver, "billing") == 3, 15, "the replayed deliveries")

    page.goto(f"{hookline.base_url}/#/jobs/{first}")  # a deep link, same tab (token kept)
    expect(page.locator("#job-status")).to_have_text("done")
    expect(page.locator("#attempts tbody tr")).to_have_count(2)  # the 400, then the 200


def test_replay_all_of_a_destination_replays_only_its_own_tenants(
        page: Any, hookline: Hookline, receivers: list[ReceiverProcess],
        tmp_path: Path) -> None:
    """The default tenant, acme and globex each have a destination `invoices` with dead
    letters: the picker names each with its tenant, the table shows the tenant, and "Replay
    all" of acme's `invoices` counts and replays acme's dead letters only (the receiver hears
    acme's again, never the others')."""
    expect = _expect()
    secret = generate_secret()
    receiver = ReceiverProcess(tmp_path / "receiver-invoices.log")
    receivers.append(receiver)
    owners = ("_default", "acme", "globex")
    endpoint = {owner: f"{owner.strip('_')}-invoices" for owner in owners}
    receiver.start(*(f"{endpoint[owner]}={secret}:status:400" for owner in owners))
    for owner in owners:
        if owner != "_default":
            status, out = hookline.call("PUT", f"/v1/admin/tenants/{owner}", {})
            assert status == 201, out
        status, out = hookline.call("POST", "/v1/admin/destinations", {
            "name": "invoices", "url": receiver.url(endpoint[owner]), "secret": secret,
            "event_types": ["bill.*"], "tenant": owner})
        assert status == 201, out
        for n in range(2 if owner == "acme" else 1):
            body = {"id": f"{owner}-bill-{n}", "type": "bill.sent", "data": {"n": n},
                    **({} if owner == "_default" else {"tenant": owner})}
            status, out = hookline.call("POST", "/v1/events", body, token=INGEST_TOKEN)
            assert status == 202, out
    _wait_for(lambda: all(_effects(receiver, endpoint[o]) == 0 and _requests(
        receiver, endpoint[o]) == (2 if o == "acme" else 1) for o in owners), 15,
        "every first attempt (a 400: dead at once)")

    page.click("#nav a[data-view=dead]")
    acme_rows = page.locator("#dead-list tr[data-job]", has=page.locator(
        "[data-col=tenant]", has_text="acme"))
    expect(acme_rows).to_have_count(2)
    page.select_option("#dead-destination", label="invoices (acme)")
    expect(page.locator("#dead-list tr[data-job]")).to_have_count(2)  # acme's only
    expect(page.locator("#replay-all")).to_have_text("Replay all of invoices (acme)")
    page.click("#replay-all")
    expect(page.locator("#confirm-text")).to_have_text(
        "Dry run: 2 dead jobs of invoices (acme) would be replayed.")
    page.click("#confirm-replay")
    _wait_for(lambda: _requests(receiver, endpoint["acme"]) == 4, 15, "acme's replays")
    time.sleep(0.5)  # a wrong replay would have reached the others by now
    assert (_requests(receiver, endpoint["_default"]), _requests(receiver, endpoint["globex"])) \
        == (1, 1)
    assert "tenant=acme" in page.url


def test_paused_destination_holds_its_jobs_until_resumed(
        page: Any, hookline: Hookline, receivers: list[ReceiverProcess], tmp_path: Path,
        screenshots: Path) -> None:
    """Pause (a button) stops deliveries: new jobs stay pending and the receiver sees no
    request; Resume delivers them all."""
    expect = _expect()
    receiver, _ = _destination_with_receiver(hookline, receivers, tmp_path, "crm", "ok",
                                             "contact.*")

    page.click("#nav a[data-view=destinations]")
    row = page.locator("tr[data-destination=crm]")
    expect(row.locator("[data-col=state]")).to_contain_text("active")
    row.locator("button[data-action=pause]").click()
    expect(row.locator("[data-col=state]")).to_contain_text("paused from the dashboard")
    expect(row.locator("button[data-action=resume]")).to_be_visible()

    for n in range(3):
        hookline.post_event(f"contact-{n}", "contact.created", {"n": n})
    expect(row.locator("[data-col=pending]")).to_have_text("3")
    time.sleep(0.5)  # a worker woken by ingest would have claimed by now
    assert _requests(receiver, "crm") == 0
    expect(row.locator("[data-col=pending]")).to_have_text("3")
    page.screenshot(path=str(screenshots / "destinations.png"), full_page=True)

    row.locator("button[data-action=resume]").click()
    expect(row.locator("[data-col=state]")).to_have_text("active")
    expect(row.locator("[data-col=pending]")).to_have_text("0")
    _wait_for(lambda: _effects(receiver, "crm") == 3, 15, "three deliveries after resume")


def test_hostile_payload_is_shown_as_text_and_never_runs(
        page: Any, hookline: Hookline, receivers: list[ReceiverProcess], tmp_path: Path,
        screenshots: Path) -> None:
    """A payload holding a <script> and an <img onerror> is shown literally on its job page:
    no script runs, no element is created from it."""
    expect = _expect()
    _destination_with_receiver(hookline, receivers, tmp_path, "audit", "ok", "audit.*")
    event_id = hookline.post_event("audit-1", "audit.logged", {
        "comment": XSS_SCRIPT, "avatar": XSS_IMG, "user": {"name": "Mallory", "id": 7}})
    job_id = hookline.job_of_event(event_id)

    page.fill("#jump-id", str(job_id))
    page.click("#jump button")
    payload = page.locator("#payload")
    expect(payload).to_contain_text(XSS_SCRIPT)
    expect(payload).to_contain_text(XSS_IMG.replace('"', '\\"'))  # JSON-escaped quotes
    expect(page.locator("#job-status")).to_have_text("done")
    expect(page.locator("#attempts tbody tr")).to_have_count(1)
    expect(page.locator("#leases tbody tr")).to_contain_text("released with a result (HTTP 200)")
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("#payload *").count() == 0  # text only, no element parsed from it
    assert page.locator("#view img, #view script").count() == 0
    page.screenshot(path=str(screenshots / "job.png"), full_page=True)

    page.click("#payload-toggle")  # as stored: still text
    expect(payload).to_contain_text('"comment": "<script>window.__xss=1</script>"')
    assert page.evaluate("() => window.__xss") is None


def test_overview_shows_health_and_a_refused_token_returns_to_the_prompt(
        page: Any, hookline: Hookline, screenshots: Path) -> None:
    """The overview shows the supervisor's live worker and the chart; signing out and
    entering a wrong token shows the prompt again with an error, the right one gets in."""
    expect = _expect()
    page.click("#nav a[data-view=overview]")
    expect(page.locator("[data-card=workers] .value")).to_have_text("1")
    expect(page.locator("[data-card=workers] .detail")).to_contain_text("1 healthy, 1 wanted")
    for series in ("line-events", "line-delivered", "line-failed"):
        expect(page.locator(f"#throughput-chart svg polyline.{series}")).to_have_count(1)
    expect(page.locator("[data-card=wal] .value")).to_have_text(re.compile(r"\d"))
    expect(page.locator("#live")).to_contain_text("live")
    page.screenshot(path=str(screenshots / "overview.png"), full_page=True)

    page.click("#sign-out")
    expect(page.locator("#login")).to_be_visible()
    assert page.evaluate("() => sessionStorage.length") == 0
    page.fill("#token", "not-the-token")
    page.click("#login-form button[type=submit]")
    expect(page.locator("#login-error")).to_contain_text("refused")
    expect(page.locator("#view")).to_be_hidden()
    page.fill("#token", TOKEN)
    page.click("#login-form button[type=submit]")
    expect(page.locator("[data-card=workers] .value")).to_have_text("1")


def test_dead_letters_page_older_and_newest(
        page: Any, hookline: Hookline, receivers: list[ReceiverProcess], tmp_path: Path) -> None:
    """More dead letters than a page: Older shows the next ones through the API's `before`,
    until there is no older page; Newest goes back (`#/dead?limit=2` makes the page small)."""
    expect = _expect()
    _destination_with_receiver(hookline, receivers, tmp_path, "pager", "status:400", "page.*")
    jobs = [hookline.job_of_event(hookline.post_event(f"page-{n}", "page.made", {"n": n}))
            for n in range(3)]
    page.goto(f"{hookline.base_url}/#/dead?destination=pager&limit=5")
    rows = page.locator("#dead-list tbody tr")
    expect(rows).to_have_count(3)  # all three dead (400 is permanent)
    newest_first = rows.evaluate_all("rs => rs.map(r => Number(r.dataset.job))")
    assert sorted(newest_first) == sorted(jobs)

    page.goto(f"{hookline.base_url}/#/dead?destination=pager&limit=2")
    check_two_pages(page, rows, "dead", "Number(r.dataset.job)", newest_first)
