"""Secret rotation end to end: a running `hookline serve` (on a SQLite file, then on
PostgreSQL) delivers real requests to a receiver on 127.0.0.1 while an operator rotates,
reveals and expires the destination's secret through the CLI and the admin API. Each request
is verified with the `standardwebhooks` package twice, as a receiver holding only the old
secret and one holding only the new one would: during the overlap both accept it, after early
expiry only the new one does."""

from __future__ import annotations

import io
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import structlog
from procs import JSON_AUTH, TEST_SETTINGS, log_records, start_cli, stop, wait_until

from hookline.rehearsal.harness import free_port
from hookline.shared.signing import generate_secret
from hookline.supervisor.cli import main as cli_main
from tests.recording import recording_handler, verifies

Recorder = recording_handler()
"""Answers 200 and keeps each request's headers and body bytes."""


class Service:
    """A running `hookline serve` on a database (a SQLite file or a PostgreSQL URL), its
    receiver, and how to talk to both."""

    def __init__(self, db: str, folder: Path, receiver: ThreadingHTTPServer) -> None:
        self.db = db
        self.log = folder / "serve.log"
        self.base = f"http://127.0.0.1:{free_port()}"
        self.receiver = receiver
        self.receiver_url = f"http://127.0.0.1:{receiver.server_port}/hook"
        self.events = 0

    def cli(self, *args: str) -> tuple[Any, list[dict[str, Any]]]:
        """Run `hookline --db DB ARGS --json` (in this process: the service is the one in
        other processes here): its JSON answer and its audit log lines."""
        out, err = io.StringIO(), io.StringIO()
        try:
            with redirect_stdout(out), redirect_stderr(err):
                code = cli_main(["--db", self.db, *args, "--json"])
        finally:
            structlog.reset_defaults()  # the CLI pointed the logs at `err`
        assert code == 0, err.getvalue()
        return json.loads(out.getvalue()), [json.loads(line) for line in
                                            err.getvalue().splitlines() if line.startswith("{")]

    def api(self, method: str, path: str, body: dict[str, Any] | None = None,
            actor: str | None = None) -> tuple[int, Any]:
        """Call the admin API; its status and JSON answer."""
        headers = {**JSON_AUTH, **({"X-Hookline-Actor": actor} if actor else {})}
        request = urllib.request.Request(
            f"{self.base}{path}", method=method, headers=headers,
            data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def deliver_one(self) -> tuple[dict[str, str], bytes]:
        """Post a new event and wait for its request to reach the receiver."""
        self.events += 1
        status, _ = self.api("POST", "/v1/events", {"id": f"e{self.events}",
                                                    "type": "invoice.paid", "data": {}})
        assert status == 202
        wait_until(lambda: len(Recorder.received) >= self.events, 30, "the delivery")
        assert len(Recorder.received) == self.events
        return Recorder.received[-1]


@pytest.fixture(scope="module")
def service(module_store_url: str, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Service]:
    """One `hookline serve` for the module's tests, on each backend in turn."""
    folder = tmp_path_factory.mktemp("rotation")
    Recorder.received = []
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    svc = Service(module_store_url, folder, receiver)
    settings = pytest.MonkeyPatch()  # the in-process CLI reads the service's settings too
    for name, value in TEST_SETTINGS.items():
        settings.setenv(name, value)
    proc = start_cli(["--db", svc.db, "serve", "--workers", "1", "--listen",
                      svc.base.removeprefix("http://")], svc.log)
    try:
        wait_until(lambda: bool(log_records(svc.log, "ingest_listening")), 30,
                   "ingest to listen")
        yield svc
    finally:
        settings.undo()
        assert stop(proc) == 0
        receiver.shutdown()
        receiver.server_close()


def test_receivers_on_either_secret_verify_during_the_overlap_only_the_new_after(service):
    """`destinations add` (with its policy flags) then deliveries through two rotations: one
    by the CLI (generated secret, 1 h overlap) ended early through the API, one through the
    API (given secret) ended early by the CLI. The CLI's `--json` answers have the API's
    shapes; every rotation, reveal and expiry is logged with who asked."""
    first = generate_secret()
    added, _ = service.cli("destinations", "add", "d", service.receiver_url, "--secret", first,
                           "--timeout", "5s", "--rate-limit", "50", "--ordered")
    assert (added["timeout_s"], added["rate_limit_per_s"], added["ordered"]) == (5, 50, True)
    assert verifies(first, service.deliver_one())

    rotated, cli_audit = service.cli("destinations", "rotate-secret", "d", "--overlap", "1h")
    second = rotated["secret"]
    assert second.startswith("whsec_") and second != first
    during = service.deliver_one()
    assert verifies(first, during) and verifies(second, during)
    assert len(during[0]["webhook-signature"].split()) == 2

    assert service.api("POST", "/v1/admin/destinations/d/expire-previous-secret",
                       actor="alice") == (200, {"name": "d", "expired": True})
    after = service.deliver_one()
    assert verifies(second, after) and not verifies(first, after)

    third = generate_secret()
    status, answer = service.api("POST", "/v1/admin/destinations/d/rotate-secret",
                                 {"secret": third, "overlap_s": 600}, actor="alice")
    assert status == 200 and answer["secret"] == third
    assert service.api("GET", "/v1/admin/destinations/d/secret") == (200, answer)
    revealed, reveal_audit = service.cli("destinations", "secret", "d")
    assert revealed == answer and set(rotated) == set(answer)
    during = service.deliver_one()
    assert verifies(second, during) and verifies(third, during)

    expired, expire_audit = service.cli("destinations", "expire-previous-secret", "d")
    assert expired == {"name": "d", "expired": True}
    after = service.deliver_one()
    assert verifies(third, after) and not verifies(second, after)

    for event, lines in (("secret_rotated", cli_audit), ("secret_revealed", reveal_audit),
                         ("previous_secret_expired", expire_audit)):
        [line] = [x for x in lines if x["event"] == event]
        assert line["destination"] == "d" and line["by"] == "operator" and line["os_user"]
    api_audit = [(r["event"], r["client"], r["actor"]) for r in log_records(service.log)
                 if r.get("by") == "admin_api" and r.get("destination") == "d"]
    assert api_audit == [("previous_secret_expired", "127.0.0.1", "alice"),
                         ("secret_rotated", "127.0.0.1", "alice"),
                         ("secret_revealed", "127.0.0.1", None)]
    log_text = service.log.read_text()
    assert not any(s in log_text for s in (first, second, third))
