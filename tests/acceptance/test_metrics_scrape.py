"""/metrics of a real `hookline serve` (ingest, 2 workers, the supervisor) that has delivered
to one receiver endpoint and failed at another: promtool finds nothing wrong with the text,
every family is there with the numbers the deliveries imply, a killed worker's restart is
counted and no counter goes down, and every Grafana panel asks for families that exist.

One service for the whole module (a scrape is cheap; starting processes is not).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import AUTH, JSON_AUTH, ROOT, child_env, start_cli, stop, wait_until
from prometheus_client.parser import text_string_to_metric_families

from hookline.rehearsal.harness import free_port
from hookline.shared.metrics_catalog import FAMILIES
from tests.promtool import GRAFANA_DASHBOARD, promtool

SECRET = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"
EVENTS = 4
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class Served:
    """A receiver with an `ok` and a `bad` (always 500) endpoint, and `hookline serve`."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {"HOOKLINE_DB": str(tmp / "m.db"), "HOOKLINE_RETRY_BASE_S": "0.1",
                    "HOOKLINE_MAX_ATTEMPTS": "2"}
        rport = free_port()
        self.receiver = subprocess.Popen(
            [sys.executable, "-m", "hookline.rehearsal.receiver", "--listen", f"127.0.0.1:{rport}",
             "--endpoint", f"ok={SECRET}:ok", "--endpoint", f"bad={SECRET}:status:500"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
        for command in (["init"], *(["destinations", "add", name,
                                     f"http://127.0.0.1:{rport}/{name}", "--secret", SECRET]
                                    for name in ("ok", "bad"))):
            added = subprocess.run(
                [sys.executable, "-m", "hookline.supervisor.cli", *command],
                capture_output=True, text=True, env={**child_env(), **self.env}, cwd=ROOT,
                timeout=60)
            assert added.returncode == 0, added.stderr
        self.proc = start_cli(["serve", "--workers", "2", "--listen", f"127.0.0.1:{self.port}"],
                              tmp / "serve.out", env=self.env)

    def close(self) -> None:
        stop(self.proc)
        self.receiver.terminate()
        self.receiver.wait(10)

    def request(self, path: str, body: bytes | None = None) -> int:
        headers = JSON_AUTH if body is not None else AUTH
        try:
            with urllib.request.urlopen(urllib.request.Request(
                    self.base + path, data=body, headers=headers), timeout=10) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return 0

    def scrape_text(self) -> str:
        with urllib.request.urlopen(urllib.request.Request(self.base + "/metrics",
                                                           headers=AUTH), timeout=10) as resp:
            return resp.read().decode()

    def scrape(self) -> Samples:
        return samples(self.scrape_text())


def samples(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(scraped: Samples, name: str, **labels: str) -> float:
    return scraped.get((name, tuple(sorted(labels.items()))), -1.0)


def settled(served: Served) -> bool:
    """Every event delivered to `ok`, every `bad` job dead after its 2 attempts, and the
    supervisor's snapshot showing both workers."""
    try:
        got = served.scrape()
    except OSError:
        return False
    return (value(got, "hookline_attempts_total", destination="ok", outcome="delivered")
            == EVENTS
            and value(got, "hookline_jobs", destination="bad", status="dead") == EVENTS
            and value(got, "hookline_children_alive", kind="worker") == 2)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    service = Served(tmp_path_factory.mktemp("metrics"))
    try:
        wait_until(lambda: service.request("/readyz") == 200, 30, "/readyz to answer 200")
        for n in range(EVENTS):
            body = json.dumps({"id": f"m-{n}", "type": "push", "data": {"n": n}}).encode()
            assert service.request("/v1/events", body) == 202
        assert service.request("/v1/events", b"{not json") == 400  # one refusal
        wait_until(lambda: settled(service), 60, "deliveries to settle in /metrics")
        yield service
    finally:
        service.close()


def test_promtool_finds_nothing_wrong_with_a_live_scrape(served: Served) -> None:
    checked = promtool("check", "metrics", stdin=served.scrape_text())
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", \
        checked.stdout + checked.stderr


def test_every_family_is_scraped_with_the_numbers_the_deliveries_imply(served: Served) -> None:
    text = served.scrape_text()
    families = {f.name: f.type for f in text_string_to_metric_families(text)}
    expected = {family.name.removesuffix("_total"): family.kind for family in FAMILIES}
    expected |= {"hookline_jobs": "gauge", "hookline_oldest_pending_age_seconds": "gauge",
                 "hookline_attempts": "counter", "hookline_attempts_in_flight": "gauge",
                 "hookline_delivery_latency_seconds": "histogram",
                 "hookline_destination_paused": "gauge",
                 "hookline_destination_failure_streak": "gauge",
                 "hookline_destination_oldest_due_age_seconds": "gauge",
                 "hookline_destinations": "gauge",
                 "hookline_events_stored": "gauge", "hookline_notifications": "counter",
                 "hookline_events_filtered": "counter",
                 "hookline_sqlite_wal_bytes": "gauge",
                 "hookline_sqlite_wal_limit_bytes": "gauge", "hookline_ready": "gauge",
                 "hookline_database_readable": "gauge", "hookline_build_info": "gauge"}
    assert families == expected
    got = samples(text)
    assert value(got, "hookline_attempts_total", destination="bad", outcome="http_5xx") \
        == 2 * EVENTS
    assert value(got, "hookline_destination_failure_streak", destination="bad") == 2 * EVENTS
    assert value(got, "hookline_delivery_latency_seconds_count", destination="ok") == EVENTS
    assert value(got, "hookline_ingest_requests_total", route="POST /v1/events",
                 status="202") == EVENTS
    assert value(got, "hookline_ingest_rejections_total", reason="invalid_event") == 1
    assert value(got, "hookline_ingest_accept_seconds_count") == EVENTS
    assert value(got, "hookline_ingest_batch_size_sum") == EVENTS
    assert value(got, "hookline_children_wanted", kind="worker") == 2
    assert value(got, "hookline_children_alive", kind="ingest") == 1
    assert value(got, "hookline_ready") == 1
    assert value(got, "hookline_database_readable") == 1
    assert value(got, "hookline_clock_steps_total") == 0
    slots = {dict(labels)["slot"] for name, labels in got
             if name == "hookline_process_cpu_seconds_total"}
    assert slots == {"supervisor", "ingest", "worker-1", "worker-2"}
    waits = {dict(labels)["slot"] for name, labels in got
             if name == "hookline_write_lock_wait_seconds_count"}
    assert waits == {"ingest", "worker-1", "worker-2"}  # the supervisor never writes
    assert {dict(labels)["slot"] for name, labels in got
            if name == "hookline_heartbeat_age_seconds"} == {"ingest", "worker-1", "worker-2"}
    [build] = [dict(labels) for name, labels in got if name == "hookline_build_info"]
    assert build["backend"] == "sqlite" and build["python"] == ".".join(
        map(str, sys.version_info[:3]))
    assert not [labels for name, labels in got if ("outcome", "in_flight") in labels]


def test_a_killed_worker_is_counted_and_no_counter_goes_down(served: Served) -> None:
    before = served.scrape()
    status = json.loads((served.tmp / "m.db.run" / "status.json").read_text())
    os.kill(status["slots"]["worker-1"]["pid"], signal.SIGKILL)
    wait_until(lambda: value(served.scrape(), "hookline_child_restarts_total",
                             slot="worker-1", cause="signal") == 1, 30, "the restart counted")
    # A process's own series (slot label) come back once the respawned worker's snapshot
    # is written, carrying on from the dead one's.
    wait_until(lambda: value(served.scrape(), "hookline_process_start_time_seconds",
                             slot="worker-1") > value(before, "hookline_process_start_time_seconds",
                                                      slot="worker-1"), 30, "the new worker-1")
    after = served.scrape()
    for (name, labels), was in before.items():
        if name.endswith(("_total", "_count", "_sum", "_bucket")) \
                and "hookline_process_cpu" not in name:
            assert after.get((name, labels), -1) >= was, (name, labels)


def test_every_dashboard_query_names_a_scraped_family(served: Served) -> None:
    dashboard = json.loads(GRAFANA_DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"]
             for target in panel.get("targets", [])]
    assert len(exprs) > 20
    scraped = {name for name, _ in served.scrape()}
    for expr in exprs:
        names = set(re.findall(r"\bhookline_[a-z_]+", expr))
        assert names and names <= scraped, (expr, names - scraped)
