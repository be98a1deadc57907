"""The customer portal in headless Chromium against a real `hookline serve`: two tenants side
by side each seeing only their own endpoints and deliveries, an endpoint added through the
event-type picker, recover with its count first, a read-only token without any action, the
message of an expired and of a revoked link, and embedding (framed by the allowed origin it
works; by another origin, and the dashboard by any, the frame is refused).

The framing pages come from small HTTP servers on 127.0.0.1 with ports of their own (another
port is another origin). Tenants are created on first publish (`tenants_auto_create`), tokens
minted through the admin API and endpoints added through the tenant API.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hookline.rehearsal.harness import Service
from hookline.shared.signing import generate_secret
from tests.browser.conftest import EXPECTED_CONSOLE
from tests.browser.support import INGEST_TOKEN, TOKEN, Hookline, ReceiverProcess

OWNER = "Acme Cloud"
# What Chromium logs when a frame's frame-ancestors refuses the page around it.
FRAME_REFUSED = re.compile(r"Framing '.*' violates the following Content Security Policy "
                           r"directive: \"frame-ancestors ")
EXPIRED_TEXT = f"This link has expired; ask {OWNER} for a new one."


class FramingSite:
    """A page on its own origin (127.0.0.1, a port of its own) holding one iframe whose
    address the test sets (`frame_src`)."""

    def __init__(self) -> None:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                page = (f'<!doctype html><title>SaaS</title><h1>Our app</h1>'
                        f'<iframe id="embedded" width="1000" height="500" '
                        f'src="{site.frame_src}"></iframe>').encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args: Any) -> None:
                pass

        self.frame_src = "about:blank"
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class World:
    """The running service and what the module set up in it."""

    hookline: Hookline
    receiver: ReceiverProcess
    allowed: FramingSite
    other: FramingSite
    secrets: dict[str, str]

    def token(self, tenant: str, **grant: Any) -> str:
        """A fresh token for `tenant` (admin API), with `grant` (ttl_s, read_only, ...)."""
        status, out = self.hookline.call("POST", f"/v1/admin/tenants/{tenant}/tokens", grant)
        assert status == 201, out
        assert out["portal_url"].endswith(f"/portal/#token={out['token']}")
        return str(out["token"])

    def publish(self, tenant: str, event_id: str, type_: str) -> None:
        status, out = self.hookline.call("POST", "/v1/events", {
            "tenant": tenant, "id": event_id, "type": type_, "data": {"n": event_id}},
            token=INGEST_TOKEN)
        assert status in (200, 202), out

    def add_endpoint(self, token: str, name: str, event_type: str) -> None:
        """An endpoint through the tenant API, pointing at the receiver's `name` endpoint."""
        status, out = self.hookline.call("POST", "/v1/tenant/destinations", {
            "name": name, "url": self.receiver.url(name), "secret": self.secrets[name],
            "event_types": [event_type]}, token=token)
        assert status == 201, out

    def portal(self, token: str) -> str:
        return f"{self.hookline.base_url}/portal/#token={token}"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """`hookline serve` allowing one framing origin, a receiver (`acme-ok`, `acme-bad`
    answering 400, `globex-ok`), tenants acme and globex with an endpoint each and a few
    deliveries (acme-bad's end dead)."""
    folder = tmp_path_factory.mktemp("portal")
    allowed, other = FramingSite(), FramingSite()
    secrets = {name: generate_secret() for name in ("acme-ok", "acme-bad", "globex-ok")}
    receiver = ReceiverProcess(folder / "receiver.log")
    receiver.start(f"acme-ok={secrets['acme-ok']}:ok", f"acme-bad={secrets['acme-bad']}:status:400",
                   f"globex-ok={secrets['globex-ok']}:ok")
    service = Service(folder / "hookline.db", folder / "service.log", workers=1, settings={
        "HOOKLINE_ADMIN_TOKEN": TOKEN, "HOOKLINE_INGEST_TOKEN": INGEST_TOKEN,
        "HOOKLINE_ALLOW_NETWORKS": "127.0.0.0/8", "HOOKLINE_TENANTS_AUTO_CREATE": "true",
        "HOOKLINE_PORTAL_FRAME_ANCESTORS": allowed.origin, "HOOKLINE_PORTAL_OWNER_NAME": OWNER})
    try:
        with ThreadPoolExecutor(1) as pool:  # Playwright's sync API owns this thread's loop
            pool.submit(lambda: asyncio.run(service.start())).result()
        built = World(Hookline(service), receiver, allowed, other, secrets)
        for tenant in ("acme", "globex"):
            built.publish(tenant, f"{tenant}-hello", "tenant.created")  # creates the tenant
        setup = {tenant: built.token(tenant) for tenant in ("acme", "globex")}
        built.add_endpoint(setup["acme"], "acme-ok", "invoice.paid")
        built.add_endpoint(setup["acme"], "acme-bad", "invoice.failed")
        built.add_endpoint(setup["globex"], "globex-ok", "invoice.paid")
        for tenant, type_ in (("acme", "invoice.paid"), ("acme", "invoice.failed"),
                              ("globex", "invoice.paid")):
            built.publish(tenant, f"{tenant}-{type_.replace('.', '-')}", type_)
        yield built
    finally:
        code = service.stop()
        receiver.stop()
        allowed.close()
        other.close()
    assert code == 0, f"hookline serve exited {code}; see {service.log_path}"
    log = service.log_path.read_text()
    assert "hlt_" not in log, "a tenant token reached the service's log"


def _expect() -> Any:
    from playwright.sync_api import expect  # only once Chromium is there

    expect.set_options(timeout=10_000)
    return expect


@pytest.fixture
def open_tab(browser: Any) -> Iterator[Any]:
    """open_tab(url) -> a tab of its own (own sessionStorage) at `url`; at the end the test
    fails if any tab threw or logged an unexpected console error."""
    contexts: list[Any] = []
    problems: list[str] = []

    def opener(url: str) -> Any:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        contexts.append(context)
        tab = context.new_page()
        tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        tab.on("console", lambda msg: problems.append(f"console: {msg.text}")
               if msg.type == "error" and not EXPECTED_CONSOLE.search(msg.text) else None)
        tab.console_messages = []  # type: ignore[attr-defined]
        tab.on("console", lambda msg: tab.console_messages.append(msg.text))
        tab.goto(url)
        return tab

    yield opener
    for context in contexts:
        context.close()
    assert [p for p in problems if not FRAME_REFUSED.search(p)] == []


def test_two_tenants_side_by_side_each_see_only_their_own(world: World, open_tab: Any,
                                                          screenshots: Path) -> None:
    """acme's and globex's portals, open at once: each lists its own endpoints with their
    health and its own deliveries only; the token has left the address bar; acme's dead
    delivery shows its attempt with the receiver's answer as text and the payload it was sent,
    and once resent its attempts by run."""
    expect = _expect()
    acme = open_tab(world.portal(world.token("acme")))
    globex = open_tab(world.portal(world.token("globex")))
    for tab in (acme, globex):
        assert "token" not in tab.url and tab.url.endswith("/portal/#/")
    expect(acme.locator("#tenant-name")).to_have_text("acme")
    expect(acme.locator("tr[data-destination='acme-ok']")).to_be_visible()
    expect(acme.locator("tr[data-destination='acme-bad'] [data-col=state]")).to_contain_text(
        "failing")
    expect(globex.locator("tr[data-destination='globex-ok']")).to_be_visible()
    expect(acme.locator("tr[data-destination]")).to_have_count(2)
    expect(globex.locator("tr[data-destination]")).to_have_count(1)
    acme.screenshot(path=str(screenshots / "portal-endpoints.png"))

    acme.click("#nav a[data-view=deliveries]")
    expect(acme.locator("#jobs tr[data-job]")).to_have_count(2)
    expect(acme.locator("#jobs")).not_to_contain_text("globex")
    globex.click("#nav a[data-view=deliveries]")
    expect(globex.locator("#jobs tr[data-job]")).to_have_count(1)
    expect(globex.locator("#jobs")).not_to_contain_text("acme")

    dead = acme.locator("#jobs tr[data-job]", has_text="dead")
    expect(dead).to_have_count(1)
    dead.locator("a").click()
    expect(acme.locator("#attempts [data-col=answer]").first).to_have_text("HTTP 400")
    expect(acme.locator("#attempts [data-col=response]").first).to_contain_text("400")
    expect(acme.locator("#payload")).to_contain_text('"n": "acme-')  # pretty-printed, as text
    expect(acme.locator("#payload")).not_to_contain_text("globex")
    acme.screenshot(path=str(screenshots / "portal-delivery.png"), full_page=True)
    # Resent, the delivery's attempts are numbered by run (each run counts from 1 again).
    acme.click("button[data-action=resend]")
    acme.click("#resend-go")
    expect(acme.locator("#attempts tr[data-attempt]")).to_have_count(2, timeout=20_000)
    expect(acme.locator("#attempts th").first).to_have_text("Run / #")
    expect(acme.locator("#attempts td.num").first).to_have_text("1 / 1")
    other_job = globex.locator("#jobs tr[data-job]").first.get_attribute("data-job")
    acme.goto(f"{world.hookline.base_url}/portal/#/jobs/{other_job}")  # token kept in the tab
    expect(acme.locator("#not-found")).to_have_text(f"No delivery #{other_job}.")


def test_a_deliveries_filter_naming_another_tenants_endpoint_says_there_is_none(
        world: World, open_tab: Any) -> None:
    """acme's deliveries filtered by `globex-ok` (globex's endpoint) say "No endpoint named
    globex-ok." in place of the list, word for word what a name nobody has gets, and leave
    no earlier rows on the page; its own endpoint's name lists its deliveries."""
    expect = _expect()
    acme = open_tab(world.portal(world.token("acme")))
    acme.click("#nav a[data-view=deliveries]")
    expect(acme.locator("#jobs tr[data-job]").first).to_be_visible()
    for name in ("globex-ok", "nobody-ok"):
        acme.fill("#filter-destination", name)
        acme.click("#deliveries-filter button[type=submit]")
        expect(acme.locator("#no-endpoint")).to_have_text(f"No endpoint named {name}.")
        expect(acme.locator("#jobs")).to_have_count(0)
        expect(acme.locator("#live")).not_to_contain_text("error")
    acme.fill("#filter-destination", "acme-ok")
    acme.click("#deliveries-filter button[type=submit]")
    expect(acme.locator("#jobs tr[data-job]").first).to_be_visible()
    expect(acme.locator("#no-endpoint")).to_have_count(0)


def test_manage_endpoint_with_the_picker_then_recover_with_the_count_first(
        world: World, open_tab: Any, screenshots: Path) -> None:
    """An endpoint added through the form (a type picked from the offered ones plus a typed
    pattern) shows in the list; recover on acme-bad shows how many failed deliveries would go
    again before sending them; a test delivery opens its job."""
    expect = _expect()
    tab = open_tab(world.portal(world.token("acme")))
    tab.click("#add-destination")
    picker = tab.locator("#event-type-picker")
    expect(picker.locator("input[data-event-type='invoice.paid']")).to_be_visible()
    tab.fill("#dest-name", "acme-new")
    tab.fill("#dest-url", world.receiver.url("acme-new"))
    picker.locator("input[data-event-type='invoice.paid']").check()
    tab.fill("#dest-other-types", "order.*")
    tab.screenshot(path=str(screenshots / "portal-add-endpoint.png"))
    tab.click("#dest-save")
    row = tab.locator("tr[data-destination='acme-new']")
    expect(row).to_contain_text("invoice.paid, order.*")
    expect(tab.locator("#secret-value")).to_contain_text("whsec_")

    tab.click("tr[data-destination='acme-bad'] a")
    expect(tab.locator("#destination-facts [data-col=state]")).to_contain_text("failing")
    tab.click("[data-action=recover]")
    expect(tab.locator("#recover-hint")).to_contain_text("still being retried are not counted")
    tab.click("#recover-count")
    expect(tab.locator("#recover-text")).to_have_text(
        "1 failed delivery of acme-bad in this window would be sent again.")
    tab.click("#recover-go")
    expect(tab.locator("#toast")).to_contain_text("1 delivery of acme-bad queued again")

    tab.click("[data-action=test]")
    expect(tab.locator("#job-facts [data-col=event_type]")).to_have_text("hookline.ping")


def test_read_only_token_sees_no_action(world: World, open_tab: Any) -> None:
    """A read-only token lists endpoints and deliveries but gets no button to change
    anything: no Add endpoint, none on an endpoint's page, no Resend on a delivery."""
    expect = _expect()
    tab = open_tab(world.portal(world.token("acme", read_only=True)))
    expect(tab.locator("#expiry")).to_contain_text("read-only")
    expect(tab.locator("tr[data-destination='acme-bad']")).to_be_visible()
    assert tab.locator("main button").count() == 0
    tab.click("tr[data-destination='acme-bad'] a")
    expect(tab.locator("#destination-jobs tr[data-job]").first).to_be_visible()
    assert tab.locator("main button").count() == 0
    tab.locator("#destination-jobs tr[data-job] a").first.click()
    expect(tab.locator("#attempts")).to_be_visible()
    assert tab.locator("main button").count() == 0


def test_expired_and_revoked_links_say_so(world: World, open_tab: Any) -> None:
    """A token past its expiry, and an open portal whose tokens the operator revokes, both end
    on "this link has expired; ask OWNER for a new one"."""
    expect = _expect()
    world.publish("initech", "initech-hello", "tenant.created")
    short = world.token("initech", ttl_s=1)
    time.sleep(1.5)
    tab = open_tab(world.portal(short))
    expect(tab.locator("#notice-text")).to_have_text(EXPIRED_TEXT)
    assert tab.locator("#view").is_hidden()

    tab.goto(world.portal(world.token("initech")))
    expect(tab.locator("#tenant-name")).to_have_text("initech")
    status, out = world.hookline.call("POST", "/v1/admin/tenants/initech/revoke-tokens", {})
    assert status == 200, out
    expect(tab.locator("#notice-text")).to_have_text(EXPIRED_TEXT)  # at the next refresh

    bare = open_tab(f"{world.hookline.base_url}/portal/")  # no link at all
    expect(bare.locator("#notice-text")).to_have_text(
        f"Open this page with the link you were given; ask {OWNER} for one.")


def test_only_the_allowed_origin_may_frame_the_portal(world: World, open_tab: Any,
                                                      screenshots: Path) -> None:
    """The allowed origin's page shows the portal in its frame; another origin's frame is
    refused by the browser (frame-ancestors), and so is the dashboard in the allowed one."""
    expect = _expect()
    token = world.token("globex", read_only=True)
    world.allowed.frame_src = world.portal(token)
    allowed = open_tab(world.allowed.origin + "/")
    frame = allowed.frame_locator("#embedded")
    expect(frame.locator("tr[data-destination='globex-ok']")).to_be_visible()
    allowed.screenshot(path=str(screenshots / "portal-embedded.png"))

    for site, src in ((world.other, world.portal(token)),
                      (world.allowed, world.hookline.base_url + "/")):
        site.frame_src = src
        tab = open_tab(site.origin + "/")
        deadline = time.monotonic() + 10
        while not any(FRAME_REFUSED.search(m) for m in tab.console_messages):
            assert time.monotonic() < deadline, f"{src} was not refused in {site.origin}"
            tab.wait_for_timeout(100)
        [child] = [f for f in tab.frames if f != tab.main_frame]
        assert child.locator("#view").count() == 0
        assert child.locator("#login").count() == 0
