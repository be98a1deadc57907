"""Fixtures for driving the dashboard in the system Chromium.

The browser is `/usr/bin/chromium`, launched by Playwright's Python package; Playwright's own
browser downloads are never used (`playwright install` needs the internet). Without that
binary the browser tests skip locally with :data:`CHROMIUM_MISSING` and FAIL when `CI` is set,
so CI cannot pass by silently skipping them (`make test` apt-installs Chromium as root).

The service is real: `hookline serve` (supervisor, ingest on 127.0.0.1, one worker process)
on a SQLite file, and receiver fixture processes (`python -m hookline.rehearsal.receiver`) playing
the destinations.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from hookline.rehearsal.harness import Service
from tests.browser.support import INGEST_TOKEN, TOKEN, Hookline, ReceiverProcess
from tests.pg import skip_or_fail_in_ci

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_MISSING = (f"Chromium not found at {CHROMIUM}: install it with `apt-get install -y "
                    "chromium` (`make test` does, as root); with CI set this is a failure")
PLAYWRIGHT_MISSING = ("the playwright package is not installed: `pip install -e '.[test]'`; "
                      "with CI set this is a failure")
# Chromium logs every non-2xx fetch; the tests provoke the answers the page shows itself: a
# refused token (401), a refused field or filter (400), a missing job or event (404) and a
# refused resend (409).
EXPECTED_CONSOLE = re.compile(r"Failed to load resource: .* status of (400|401|404|409) ")
SCREENSHOTS_ENV = "DASHBOARD_SCREENSHOTS"
"""Environment variable: a folder to write the page screenshots to (e.g. docs/screenshots)."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless system Chromium (module-wide); skips or fails as the module docstring says."""
    if not os.access(CHROMIUM, os.X_OK):
        skip_or_fail_in_ci(CHROMIUM_MISSING)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail_in_ci(PLAYWRIGHT_MISSING)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: $DASHBOARD_SCREENSHOTS when set, else a temporary folder."""
    wanted = os.environ.get(SCREENSHOTS_ENV)
    folder = Path(wanted) if wanted else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def hookline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hookline]:
    """`hookline serve` with one worker on a fresh SQLite file, admin and ingest tokens set,
    destinations on 127.0.0.1 allowed (HOOKLINE_ALLOW_NETWORKS, for the SSRF guard)."""
    folder = tmp_path_factory.mktemp("hookline")
    service = Service(folder / "hookline.db", folder / "service.log", workers=1, settings={
        "HOOKLINE_ADMIN_TOKEN": TOKEN, "HOOKLINE_INGEST_TOKEN": INGEST_TOKEN,
        "HOOKLINE_ALLOW_NETWORKS": "127.0.0.0/8"})
    try:
        # In a thread of its own: Playwright's sync API keeps an event loop running in this one.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(lambda: asyncio.run(service.start())).result()
        yield Hookline(service)
    finally:
        code = service.stop()
        assert code == 0, f"hookline serve exited {code}; see {service.log_path}"


@pytest.fixture(scope="module")
def receivers() -> Iterator[list[ReceiverProcess]]:
    """Receiver processes a test starts; each is stopped at the end of the module."""
    started: list[ReceiverProcess] = []
    yield started
    for receiver in started:
        receiver.stop()


def _signed_in_tab(browser: Any, hookline: Hookline) -> tuple[Any, Any, list[str]]:
    """A new context and tab (1280x800) signed in to the dashboard, and the list its page
    errors and console errors (a CSP violation by our own files is one) are appended to."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    tab.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}")
           if msg.type == "error" and not EXPECTED_CONSOLE.search(msg.text) else None)
    expect.set_options(timeout=10_000)
    tab.goto(hookline.base_url + "/")
    tab.fill("#token", TOKEN)
    tab.click("#login-form button[type=submit]")
    expect(tab.locator("#view h1")).to_have_text("Overview")
    return context, tab, problems


@pytest.fixture
def page(browser: Any, hookline: Hookline, screenshots: Path) -> Iterator[Any]:
    """A fresh tab (1280x800) signed in to the dashboard. At the end, the test fails if the
    page threw or logged a console error (a CSP violation by our own files is one)."""
    context, tab, problems = _signed_in_tab(browser, hookline)
    yield tab
    context.close()
    assert problems == []


@pytest.fixture(scope="module")
def module_tab(browser: Any, hookline: Hookline) -> Iterator[tuple[Any, list[str]]]:
    """One signed-in tab for a whole module (saves a sign-in per test), with its problems."""
    context, tab, problems = _signed_in_tab(browser, hookline)
    yield tab, problems
    context.close()


@pytest.fixture
def shared_page(module_tab: tuple[Any, list[str]]) -> Iterator[Any]:
    """The module's signed-in tab, back on the overview; the test fails if the page threw or
    logged a console error during it."""
    tab, problems = module_tab
    tab.goto(tab.url.split("#")[0] + "#/")
    yield tab
    found, problems[:] = problems[:], []
    assert found == []
