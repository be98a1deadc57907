"""The operator's tenant commands against a running `hookline serve` (a SQLite file; the
same commands run on both backends in-process in tests/integration/test_tenants_cli.py),
through the real CLI as OS processes: tenants put and delete, `destinations add
--tenant`, `hookline send --tenant`, with a receiver on 127.0.0.1 checking that the tenant's
event reaches only its endpoint, not the same-named destination of the default tenant."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from procs import ROOT, child_env, healthy, log_records, start_cli, stop

from hookline.rehearsal.harness import free_port
from hookline.rehearsal.receiver import Endpoint, Receiver
from hookline.shared.signing import generate_secret


def hookline(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookline.supervisor.cli", "--db", db, *args],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT,
                          timeout=60, check=False)


def ok_json(db: str, *args: str) -> object:
    done = hookline(db, *args, "--json")
    assert done.returncode == 0, (args, done.stderr)
    return json.loads(done.stdout)


async def until(predicate: object, what: str, timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await asyncio.to_thread(predicate):  # type: ignore[arg-type]
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@pytest.mark.sqlite_only
async def test_tenant_commands_on_a_running_service(store_url: str, tmp_path: Path):
    db = store_url
    secret = generate_secret()
    async with Receiver([Endpoint("acme", secret), Endpoint("globex", secret)]) as receiver:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = tmp_path / "serve.log"
        service = start_cli(["--db", db, "serve", "--workers", "1", "--listen",
                             f"127.0.0.1:{port}"], log)
        try:
            await until(lambda: log.exists() and len(log_records(log, "worker_started")) == 1
                        and healthy(base), "the service to start")
            await asyncio.to_thread(_operate, db, base, receiver, secret)
            await until(lambda: len(receiver.requests) == 1, "acme's delivery")
            assert [r.endpoint for r in receiver.requests] == ["acme"]
            await asyncio.to_thread(_delete, db)
        finally:
            code = await asyncio.to_thread(stop, service)
    assert code == 0
    assert [r.endpoint for r in receiver.requests] == ["acme"]


def _operate(db: str, base: str, receiver: Receiver, secret: str) -> None:
    created = ok_json(db, "tenants", "put", "acme", "--name", "Acme Inc")
    assert (created["id"], created["name"]) == ("acme", "Acme Inc")  # type: ignore[index]
    for tenant, endpoint in (("acme", "acme"), (None, "globex")):  # the same name twice
        added = ok_json(db, "destinations", "add", "hooks", receiver.url(endpoint),
                        "--secret", secret, *(("--tenant", tenant) if tenant else ()))
        assert added["tenant"] == (tenant or "_default")  # type: ignore[index]
    sent = subprocess.run(
        [sys.executable, "-m", "hookline.supervisor.cli", "send", "invoice.paid", "--tenant",
         "acme", "--url", base, "--data", '{"n": 1}', "--json"],
        capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=60, check=False)
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["jobs"] == 1
    unknown = subprocess.run(  # not there: exit 1 (run time), as every command's not found
        [sys.executable, "-m", "hookline.supervisor.cli", "send", "invoice.paid", "--tenant",
         "nobody", "--url", base],
        capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=60, check=False)
    assert unknown.returncode == 1 and "tenant_not_found" in unknown.stderr, unknown.stderr


def _delete(db: str) -> None:
    deleted = hookline(db, "tenants", "delete", "acme")
    assert deleted.returncode == 0 and "removed tenant acme: 1 destination" in deleted.stdout
    [audit] = [json.loads(line) for line in deleted.stderr.splitlines()
               if "tenant_deleted" in line]
    assert (audit["tenant"], audit["by"]) == ("acme", "operator") and audit["os_user"]
