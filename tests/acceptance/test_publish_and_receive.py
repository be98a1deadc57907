"""Publishing and receiving against a running `hookline serve`: the clients and `hookline
send` publish to it; the receiver examples in docs/examples (real processes, aiohttp and
Flask) get its real deliveries, verify and deduplicate them. A service frozen or killed and
restarted while a send is retrying still ends with every event stored exactly once.

One service, two receivers and one database serve the whole module (the restart test comes
last: it replaces the service process).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hookline_client import (
    AsyncHooklineClient,
    HooklineClient,
    HooklineRejected,
    SendResult,
)
from procs import ROOT, TEST_TOKEN, child_env, log_records, start_cli, stop, wait_until

from hookline.rehearsal.harness import free_port
from hookline.shared.signing import generate_secret, signed_headers
from hookline.shared.store import open_store
from hookline.supervisor.cli.main import main as cli_main

EXAMPLES = ("aiohttp", "flask")


def hookline(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", *args],
                          capture_output=True, text=True, env={**child_env(), **env}, cwd=ROOT,
                          timeout=60)


@dataclass
class Receiver:
    """One docs/examples receiver running as its own process."""

    name: str
    port: int
    secret: str
    db: Path
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/webhooks"

    def effects(self) -> dict[str, int]:
        """webhook-id -> how many times the receiver applied it."""
        if not self.db.exists():
            return {}
        with sqlite3.connect(self.db) as db:
            return dict(db.execute(
                "SELECT webhook_id, count(*) FROM effects GROUP BY webhook_id").fetchall())

    def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(self.url, data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def listening(self) -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=1)
        except urllib.error.HTTPError:
            return True  # 404/405: the app answers
        except OSError:
            return False
        return True


@dataclass
class World:
    tmp: Path
    port: int
    env: dict[str, str]
    receivers: dict[str, Receiver] = field(default_factory=dict)
    serve: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_serve(self) -> None:
        self.serve = start_cli(["serve", "--workers", "1", "--listen", f"127.0.0.1:{self.port}"],
                               self.tmp / "serve.out", env=self.env)
        wait_until(self.ready, 30, "hookline serve to be ready")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base}/readyz", timeout=1) as resp:
                return resp.status == 200
        except OSError:
            return False

    def stored(self) -> dict[str, int]:
        """source_event_id -> stored events with it (the service's own database)."""
        with sqlite3.connect(self.env["HOOKLINE_DB"]) as db:
            return dict(db.execute("SELECT source_event_id, count(*) FROM events "
                                   "GROUP BY source, source_event_id").fetchall())

    def message_id(self, event_id: str) -> str:
        with sqlite3.connect(self.env["HOOKLINE_DB"]) as db:
            [(message_id,)] = db.execute("SELECT message_id FROM events WHERE "
                                         "source_event_id = ?", (event_id,)).fetchall()
        return str(message_id)

    def delivered_everywhere(self, message_id: str) -> bool:
        return all(r.effects().get(message_id) for r in self.receivers.values())

    def service_pids(self) -> list[int]:
        """The supervisor and its children."""
        assert self.serve is not None
        pid = self.serve.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return [pid, *map(int, children)]

    def ingest_pid(self) -> int:
        status = json.loads((Path(self.env["HOOKLINE_DB"] + ".run") / "status.json").read_text())
        return int(status["slots"]["ingest"]["pid"])


async def add_destinations(db: str, receivers: list[Receiver]) -> None:
    store = open_store(db)
    await store.open()
    try:
        for r in receivers:
            await store.add_destination(name=r.name, url=r.url, secret=r.secret,
                                        event_types=["*"], max_in_flight=4)
    finally:
        await store.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("publish")
    env = {"HOOKLINE_DB": str(tmp / "svc.db"), "HOOKLINE_RETRY_BASE_S": "0.2"}
    w = World(tmp, free_port(), env)
    try:
        for name in EXAMPLES:  # the receivers, the database and the service start together
            port, secret = free_port(), generate_secret()
            with (tmp / f"{name}.out").open("ab") as out:
                proc = subprocess.Popen(
                    [sys.executable, str(ROOT / "docs" / "examples" / f"receiver_{name}.py"),
                     "--port", str(port), "--db", str(tmp / f"{name}.sqlite3")],
                    stdout=out, stderr=subprocess.STDOUT, cwd=tmp,
                    env={**child_env(), "WEBHOOK_SECRET": secret})
            w.receivers[name] = Receiver(name, port, secret, tmp / f"{name}.sqlite3", proc)
        asyncio.run(add_destinations(env["HOOKLINE_DB"], list(w.receivers.values())))
        w.start_serve()
        for r in w.receivers.values():
            wait_until(r.listening, 30, f"the {r.name} receiver to listen")
        yield w
    finally:
        if w.serve is not None:
            stop(w.serve)
        for r in w.receivers.values():
            r.proc.terminate()
            r.proc.wait(10)


def test_send_is_accepted_then_a_resend_is_a_duplicate(world: World) -> None:
    with HooklineClient(world.base, TEST_TOKEN) as client:
        first = client.send("order.created", {"order": 1, "note": "é"}, id="order-1")
        again = client.send("order.created", {"order": 1, "note": "é"}, id="order-1")
        generated = client.send("order.created", {"order": 2})
    assert (first.outcome, first.jobs, first.attempts) == ("accepted", 2, 1)
    assert (again.outcome, again.event_id, again.message_id) == (
        "duplicate", first.event_id, first.message_id)
    assert generated.accepted and generated.id.startswith("evt_")
    assert world.stored()["order-1"] == 1 and world.stored()[generated.id] == 1


async def test_async_client_sends_and_recognises_its_duplicate(world: World) -> None:
    async with AsyncHooklineClient(world.base, TEST_TOKEN) as client:
        first = await client.send("order.paid", [1, 2, 3], id="paid-1", source="shop")
        again = await client.send("order.paid", [1, 2, 3], id="paid-1", source="shop")
        with pytest.raises(HooklineRejected) as caught:
            await client.send("order paid", {})
    assert first.accepted and again.duplicate and again.event_id == first.event_id
    error = caught.value
    assert (error.status, error.code, error.field) == (400, "invalid_event", "type")
    assert "must match" in error.message


def test_a_wrong_token_is_a_typed_refusal(world: World) -> None:
    with HooklineClient(world.base, "not-the-token") as client, \
            pytest.raises(HooklineRejected) as caught:
        client.send("order.created", {})
    assert (caught.value.status, caught.value.code) == (401, "unauthorized")


def test_hookline_send_exit_codes(world: World, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    # The real console command once, in its own process ...
    env = {**world.env, "HOOKLINE_LISTEN": f"127.0.0.1:{world.port}"}
    sent = hookline("send", "order.shipped", "--data", '{"order": 3}', "--id", "cli-1",
                    "--json", env=env)
    assert sent.returncode == 0, sent.stderr
    answer = json.loads(sent.stdout)
    assert answer["duplicate"] is False and answer["jobs"] == 2 and answer["id"] == "cli-1"
    # ... and its other outcomes in this process (the same entry point, without the
    # interpreter's start-up each time).
    for name, value in {**child_env(), **env}.items():
        if name.startswith("HOOKLINE_"):
            monkeypatch.setenv(name, value)

    def run(*args: str) -> tuple[int, str, str]:
        code = cli_main(["send", *args])
        out, err = capsys.readouterr()
        return code, out, err

    data_file = world.tmp / "data.json"
    data_file.write_text('{"order": 3}')
    code, out, _ = run("order.shipped", "--data-file", str(data_file), "--id", "cli-1")
    assert code == 0 and out.startswith("duplicate: id cli-1"), out
    code, _, err = run("order shipped")
    assert code == 2 and "400 invalid_event (type)" in err
    code, _, err = run("order.shipped", "--data", "{not json")
    assert code == 2 and "--data is not valid JSON" in err
    code, _, err = run("order.shipped", "--id", "cli-2", "--url",
                       f"http://127.0.0.1:{free_port()}", "--deadline", "0.5")
    assert code == 1 and "send again with --id cli-2" in err
    monkeypatch.delenv("HOOKLINE_INGEST_TOKEN")
    code, _, err = run("order.shipped")
    assert code == 2 and "HOOKLINE_INGEST_TOKEN" in err
    assert world.stored()["cli-1"] == 1 and "cli-2" not in world.stored()


def test_receiver_examples_verify_and_apply_each_delivery_once(world: World) -> None:
    with HooklineClient(world.base, TEST_TOKEN) as client:
        sent = [client.send("invoice.paid", {"invoice": n}, id=f"inv-{n}") for n in range(3)]
    for result in sent:
        wait_until(lambda r=result: world.delivered_everywhere(r.message_id), 30,
                   f"{result.id} delivered to both receivers")
    body = json.dumps({"id": "inv-0", "type": "invoice.paid", "data": {"invoice": 0}},
                      separators=(",", ":"))
    for r in world.receivers.values():
        effects = r.effects()
        assert all(effects[s.message_id] == 1 for s in sent), (r.name, effects)
        with sqlite3.connect(r.db) as db:
            [(data,)] = db.execute("SELECT data FROM effects WHERE webhook_id = ?",
                                   (sent[0].message_id,)).fetchall()
        assert json.loads(data) == {"invoice": 0}  # the publisher's data, as sent
        # A redelivery as hookline sends it (same webhook-id and body, a fresh timestamp):
        # answered 2xx, not applied again.
        headers = {"content-type": "application/json",
                   **signed_headers(sent[0].message_id, body.encode(), [r.secret])}
        assert r.post(body.encode(), headers) == (200, {"ok": True, "duplicate": True})
        # Tampered, signed with another secret, or too old: refused, nothing applied.
        fresh = signed_headers("msg_forged", body.encode(), [r.secret])
        old = signed_headers("msg_old", body.encode(), [r.secret], now_s=time.time() - 600)
        for attempt_body, attempt_headers in (
                (body.replace("0}", "9}").encode(), fresh),
                (body.encode(), signed_headers("msg_other", body.encode(),
                                               [generate_secret()])),
                (body.encode(), old)):
            status, answer = r.post(attempt_body, attempt_headers)
            assert status == 401, (r.name, answer)
        assert r.effects() == effects  # nothing new
    assert "too old" in r.post(body.encode(), old)[1]["error"]


def test_a_service_frozen_then_killed_and_restarted_mid_send_stores_each_event_once(
        world: World) -> None:
    """First the ingest process is frozen (SIGSTOP) while a send is in flight: the client
    times out and sends again; once thawed, the first request commits and the retry is
    answered as a duplicate, which the client reports as success. Then the whole service is
    SIGKILLed: the client meets refused connections until a new `hookline serve` is up."""
    results: dict[str, SendResult | Exception] = {}

    def send_in_background(event_id: str) -> threading.Thread:
        def run() -> None:
            try:
                with HooklineClient(world.base, TEST_TOKEN, deadline_s=60,
                                    attempt_timeout_s=0.5, backoff_cap_s=0.3) as client:
                    results[event_id] = client.send("order.created", {"n": 1}, id=event_id)
            except Exception as exc:  # noqa: BLE001  (the assertions below report it)
                results[event_id] = exc
        thread = threading.Thread(target=run)
        thread.start()
        return thread

    ingest = world.ingest_pid()
    os.kill(ingest, signal.SIGSTOP)
    try:
        frozen = send_in_background("restart-1")
        time.sleep(1.2)  # at least one attempt timed out, its request queued in the socket
    finally:
        os.kill(ingest, signal.SIGCONT)
    frozen.join(60)
    result = results["restart-1"]
    assert isinstance(result, SendResult), result
    assert result.attempts >= 2
    assert world.stored()["restart-1"] == 1
    # a request of the timed-out attempt was stored, and the retry found it already there
    out = world.tmp / "serve.out"
    assert len(log_records(out, "event_accepted", source_event_id="restart-1")) == 1
    assert log_records(out, "event_duplicate", source_event_id="restart-1")

    pids = world.service_pids()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    assert world.serve is not None
    world.serve.wait(10)
    wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in pids), 10,
               "every service process gone")
    killed = send_in_background("restart-2")
    time.sleep(0.5)  # the client meets refused connections meanwhile
    world.start_serve()
    killed.join(60)
    result = results["restart-2"]
    assert isinstance(result, SendResult) and result.accepted, result
    assert result.attempts >= 2
    stored = world.stored()
    assert stored["restart-1"] == stored["restart-2"] == 1
    assert set(stored.values()) == {1}  # nothing anywhere stored twice
    for event_id in ("restart-1", "restart-2"):
        message_id = world.message_id(event_id)
        wait_until(lambda m=message_id: world.delivered_everywhere(m), 30,
                   f"{event_id} delivered to both receivers")
        assert {r.effects()[message_id] for r in world.receivers.values()} == {1}
