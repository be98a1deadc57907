"""The real `hookline` CLI in subprocesses: destinations, serve end to end, and the demo."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from procs import JSON_AUTH, ROOT, child_env, healthy, start_cli, stop, wait_until

from hookline.rehearsal.harness import free_port
from tests.integration.test_cli_output import PYTHON_REPR


def hookline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", *args],
                          capture_output=True, text=True, env={**child_env(), **(env or {})},
                          cwd=ROOT, timeout=60)


def post(url: str, body: bytes, content_type: str = "application/json") -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body,
                                     headers={**JSON_AUTH, "content-type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_destinations_add_and_list(tmp_path: Path):
    """`destinations add` prints a generated secret once; `list` never shows it; a taken
    name is a one-line error with exit 1, a bad URL or event type one with exit 2 (usage);
    the db also comes from HOOKLINE_DB; `receiver` works after global flags."""
    db = str(tmp_path / "cli.db")
    assert hookline("--db", db, "init").returncode == 0  # only serve and init create one
    added = hookline("destinations", "add", "billing", "https://example.com/h",
                     "--event-type", "invoice.*", "--max-in-flight", "2", "--db", db)
    assert added.returncode == 0, added.stderr
    secret = added.stdout.split("shown once): ")[1].strip()
    assert secret.startswith("whsec_")
    listed = hookline("destinations", "list", "--json", env={"HOOKLINE_DB": db})
    [row] = json.loads(listed.stdout)
    assert row["name"] == "billing" and row["event_types"] == ["invoice.*"]
    assert row["max_in_flight"] == 2 and secret not in listed.stdout
    again = hookline("--db", db, "destinations", "add", "billing", "https://example.com/h")
    assert again.returncode == 1 and "already exists" in again.stderr
    bad = hookline("--db", db, "destinations", "add", "x", "ftp://example.com/")
    assert bad.returncode == 2 and "http" in bad.stderr
    no_host = hookline("--db", db, "destinations", "add", "x", "http://")
    assert no_host.returncode == 2 and "host" in no_host.stderr
    empty_type = hookline("--db", db, "destinations", "add", "x", "http://h/", "--event-type", "")
    assert empty_type.returncode == 2 and "--event-type" in empty_type.stderr
    loud = hookline("--db", db, "stats", env={"HOOKLINE_LOG_LEVEL": "loud"})
    assert loud.returncode == 2 and "log_level" in loud.stderr and "Traceback" not in loud.stderr
    receiver_help = hookline("--db", db, "receiver", "--help")
    assert receiver_help.returncode == 0 and "--endpoint" in receiver_help.stdout


def test_serve_accepts_rejects_and_stops_cleanly(tmp_path: Path):
    """`hookline serve`: a valid event is answered 202 with its jobs; malformed input gets a
    JSON 4xx and stores nothing; a repeat is a duplicate; SIGTERM exits 0 with no child left."""
    db = str(tmp_path / "serve.db")
    assert hookline("--db", db, "init").returncode == 0
    assert hookline("--db", db, "destinations", "add", "a", "http://127.0.0.1:9/a").returncode == 0
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    service = start_cli(["--db", db, "serve", "--workers", "2", "--listen", f"127.0.0.1:{port}"],
                        tmp_path / "serve.log")
    try:
        wait_until(lambda: healthy(base), 15, "ingest to answer /healthz")
        status, body = post(f"{base}/v1/events", b'{"id": "e1", "type": "push", "data": {}}')
        assert status == 202 and body["jobs"] == 1
        status, body = post(f"{base}/v1/events", b'{"id": "e1", "type": "push", "data": {}}')
        assert status == 200 and body["duplicate"] is True
        for bad in (b"", b"not json", b"[]", b'{"id": "a.b", "type": "push", "data": 1}',
                    b'{"id": "e2", "type": "has space", "data": 1}'):
            status, body = post(f"{base}/v1/events", bad)
            assert status == 400 and body["error"] == "invalid_event", bad
        stats = json.loads(hookline("--db", db, "stats", "--json").stdout)
        assert stats["events"] == 1
    finally:
        t0 = time.monotonic()
        code = stop(service)
    assert code == 0 and time.monotonic() - t0 < 15
    log = [json.loads(line) for line in (tmp_path / "serve.log").read_text().splitlines()
           if line.startswith("{")]
    started = {e["child_pid"] for e in log if e["event"] == "child_started"}
    assert len(started) == 3
    for pid in started:
        assert not Path(f"/proc/{pid}").exists()


def test_demo_without_its_payload_examples_says_where_they_are(tmp_path: Path):
    """An installed hookline has no rehearsal/data/github/: the demo says where the examples
    come from and exits 2 before starting anything; --data points it at a copy."""
    empty = tmp_path / "no-examples"
    empty.mkdir()
    result = hookline("demo", "--out", str(tmp_path / "out"), "--data", str(empty))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "rehearsal/data/github/" in result.stderr and "--data DIR" in result.stderr
    assert "make demo" in result.stderr and not (tmp_path / "out").exists()


def test_demo_runs_and_every_check_holds(tmp_path: Path):
    """`hookline demo` delivers the GitHub examples and all its checks pass: one receiver
    effect per done job, retries on the response-loss endpoint, never two concurrent requests."""
    result = hookline("demo", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["ok"] and summary["events_posted"] == 273
    assert summary["jobs_by_status"]["done"] == summary["jobs"] == summary["receiver_effects"]
    for name in ("jobs.csv", "attempts.csv", "receipts.json"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    # It ends in words: what each endpoint simulates, why attempts exceed jobs, what next.
    report = result.stdout
    for words in ("archive", "ci", "lossy", "triage", "more than jobs because",
                  f"{summary['attempts']}: ", "Try next", " job ", "hookline logs",
                  "dashboard", "http://127.0.0.1:8080/"):
        assert words in report, (words, report)
    # The suggested service is ready: it has an ingest token (without one it refuses every
    # event, and /readyz says 503: tests/acceptance/test_one_supervisor.py).
    assert "HOOKLINE_INGEST_TOKEN=try-sending" in report
    assert not PYTHON_REPR.search(report), PYTHON_REPR.search(report)
