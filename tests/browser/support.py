"""Helpers for the browser tests: receiver processes and a small client for test set-up."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from hookline.rehearsal.harness import ROOT, Service, child_env

TOKEN = "browser-test-admin-token"
INGEST_TOKEN = "browser-test-ingest-token"


class ReceiverProcess:
    """`python -m hookline.rehearsal.receiver` on 127.0.0.1, restartable on the same port with other
    behaviours (how a test "fixes" a failing destination).

    Args:
        log_path: its stderr (JSON log lines) is appended here.
    """

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *endpoints: str, timeout_s: float = 15.0) -> None:
        """Serve `NAME=SECRET:BEHAVIOUR` endpoints (on the previous port after a restart).

        Raises:
            RuntimeError: it did not announce its port within `timeout_s` seconds.
        """
        args = [sys.executable, "-m", "hookline.rehearsal.receiver",
                "--listen", f"127.0.0.1:{self.port}"]
        for spec in endpoints:
            args += ["--endpoint", spec]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log,
                                         env=child_env(), cwd=ROOT)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            self.stop()
            raise RuntimeError(f"the receiver did not start; see {self.log_path}")
        self.port = json.loads(line)["port"]

    def url(self, name: str) -> str:
        """The URL of endpoint `name`."""
        return f"http://127.0.0.1:{self.port}/{name}"

    def summary(self) -> dict[str, Any]:
        """Its `GET /_summary` (requests and effects per endpoint)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_summary", timeout=5) as r:
            return dict(json.load(r))

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL after 10 s)."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


class Hookline:
    """A running `hookline serve` plus a tiny admin/ingest client for test set-up.

    Args:
        service: the started service (hookline.rehearsal.harness.Service).
    """

    def __init__(self, service: Service) -> None:
        self.service = service
        self.base_url = service.base_url

    def call(self, method: str, path: str, body: Any = None, *,
             token: str = TOKEN) -> tuple[int, Any]:
        """One HTTP request with `Authorization: Bearer token` (the admin token unless told);
        returns (status, decoded JSON body)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, json.load(exc)

    def add_destination(self, name: str, url: str, secret: str, event_type: str) -> None:
        """Register a destination through the admin API."""
        status, out = self.call("POST", "/v1/admin/destinations", {
            "name": name, "url": url, "secret": secret, "event_types": [event_type]})
        assert status == 201, out

    def post_event(self, event_id: str, type_: str, data: Any) -> int:
        """POST /v1/events; returns the event id."""
        status, out = self.call("POST", "/v1/events", {"id": event_id, "type": type_,
                                                        "data": data}, token=INGEST_TOKEN)
        assert status == 202, out
        return int(out["event_id"])

    def job_of_event(self, event_id: int) -> int:
        """The id of the (only) job of an event."""
        status, jobs = self.call("GET", "/v1/admin/jobs?limit=1000")
        assert status == 200
        [job_id] = [j["id"] for j in jobs if j["event_id"] == event_id]
        return int(job_id)


def check_two_pages(page: Any, rows: Any, pager: str, key_js: str,
                    newest_first: list[Any]) -> None:
    """A dashboard listing of three rows paged two at a time (`limit=2` in its address), on
    its first page: it shows the newest two with Newest disabled; Older shows the third with
    Older disabled; Newest shows the first two again. `pager`: the buttons' id prefix
    (`PAGER-newest`, `PAGER-older`); `key_js`: a row's key, from `r` (e.g.
    `Number(r.dataset.job)`); `newest_first`: the three keys, newest first."""
    from playwright.sync_api import expect  # only once Chromium is there

    def keys() -> Any:
        return rows.evaluate_all(f"rs => rs.map(r => {key_js})")

    expect(rows).to_have_count(2)
    assert keys() == newest_first[:2]
    expect(page.locator(f"#{pager}-newest")).to_be_disabled()
    page.click(f"#{pager}-older")
    expect(rows).to_have_count(1)
    assert keys() == newest_first[2:]
    expect(page.locator(f"#{pager}-older")).to_be_disabled()
    page.click(f"#{pager}-newest")
    expect(rows).to_have_count(2)
    assert keys() == newest_first[:2]
