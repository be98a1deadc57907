"""The running ingest process against its OpenAPI document (ingest/openapi.json).

A real `python -m hookline.ingest` serves a real SQLite file on a free 127.0.0.1 port; schemathesis
generates requests for every operation of the document (its examples, its coverage cases,
then fuzzing, a bounded and derandomized number of each) and checks each answer: no 5xx, a
documented status, the documented content type and headers, and a body matching the
documented schema. Every operation that names a bearer scheme is also called without a valid
token (401) and against a second ingest that has no tokens configured (403; the tenant API's
tokens need no setting, and that ingest's database has another key: 401 `token_invalid`);
the tenant API is called with a tenant token of the default tenant, which owns the seeded
rows (and must get past the token checks: the revoke example names another tenant). The
document must list exactly the routes the app registers.

Run it alone with `.venv/bin/python -m pytest -q tests/integration/test_api_contract.py`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from schemathesis import checks as st_checks

from hookline.ingest.openapi import openapi_bytes
from hookline.shared.config import Config
from hookline.shared.models import AttemptResult, Dead
from hookline.shared.process.lifecycle import STATUS_FILE, runtime_dir, write_status
from hookline.shared.signing import generate_secret
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.tenant_models import TenantFields
from hookline.shared.tenant_tokens import CAPABILITIES, issue
from tests.conftest import new_event

ROOT = Path(__file__).resolve().parents[2]
OPENAPI_PATH = ROOT / "ingest" / "openapi.json"
ADMIN_TOKEN = "contract-admin-token"
INGEST_TOKEN = "contract-ingest-token"
MAX_EXAMPLES = 12
"""Generated cases per operation and phase: enough to find shape bugs, bounded for 2 cores."""
TENANT_TOKEN: dict[str, str] = {}
"""The tenant token the seeding minted (`token`), for the operations of the tenantToken scheme."""

CHECKS = [st_checks.not_a_server_error, st_checks.status_code_conformance,
          st_checks.content_type_conformance, st_checks.response_schema_conformance,
          st_checks.response_headers_conformance]

SCHEMA = schemathesis.openapi.from_path(
    OPENAPI_PATH,
    config=schemathesis.Config.from_dict({
        "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none",
                       # Authorization is ours to send (below), never generated.
                       "with-security-parameters": False},
        "phases": {"stateful": {"enabled": False}},
    }),
)


def _seed(config: Config) -> str:
    """Fill the database the examples in the document name: destination `billing`, destination
    `signing` (the secret routes' example, which no DELETE example removes first), a source
    of each scheme named after it, and job 1 (dead, so replay and the job story have
    something to show); and write a supervisor status file naming a live pid (this test's),
    so `/v1/admin/supervisor` answers `known: true` with every field. Its worker is not
    healthy, so `/readyz` still answers 503. Returns a tenant token of the default tenant
    (every capability), signed with the database's key."""
    async def seed() -> str:
        async with SqliteStore(config.db) as store:
            await store.add_destination(name="billing", url="http://127.0.0.1:9/b",
                                        secret=generate_secret(), event_types=("*",),
                                        max_in_flight=2)
            await store.add_destination(name="signing", url="http://127.0.0.1:9/s",
                                        secret=generate_secret(), event_types=("*",),
                                        max_in_flight=2)
            for scheme in ("github", "stripe", "token"):
                await store.add_source(name=scheme, scheme=scheme, secret="s" * 32)
            await store.add_source(name="standard", scheme="standard",
                                   secret=generate_secret())
            await store.add_event(new_event("seeded", "invoice.paid"))
            [claim] = await store.claim("contract", 1, 30.0, 18)
            await store.finish([(claim, Dead(error="seeded dead"),
                                 AttemptResult(started_at=time.time(), duration_s=0.01,
                                               status_code=410))])
            await store.put_tenant("offboarded", TenantFields(name="revoke-tokens' example"))
            token, _ = await issue(store, "_default", ttl_s=86_400, capabilities=CAPABILITIES,
                                   read_only=False)
            return token

    token = asyncio.run(seed())
    runtime = runtime_dir(config)
    runtime.mkdir(exist_ok=True)
    write_status(runtime / STATUS_FILE, {
        "pid": os.getpid(), "stopping": False, "workers_wanted": 1, "workers_alive": 1,
        "workers_healthy": 0, "slots": {"worker-0": {"pid": os.getpid(), "healthy": False}},
        "updated_at": time.time()})
    return token


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m hookline.ingest` on a fresh, seeded SQLite file and a free port; its base URL."""
    folder = tmp_path_factory.mktemp("contract")
    # No worker runs here, so a test delivery with ?wait=true waits its whole bound
    # (attempt_timeout_s + CLAIM_ALLOWANCE_S): keep that well under the cases' 10 s timeout.
    config = Config(db=str(folder / "contract.db"), listen="127.0.0.1:0",
                    admin_token=ADMIN_TOKEN, ingest_token=INGEST_TOKEN,
                    retention_interval_s=0, attempt_timeout_s=2.0)
    TENANT_TOKEN["token"] = _seed(config)
    with _ingest(config, folder) as url:
        yield url


@pytest.fixture(scope="module")
def tokenless_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m hookline.ingest` with neither admin_token nor ingest_token configured."""
    folder = tmp_path_factory.mktemp("tokenless")
    config = Config(db=str(folder / "tokenless.db"), listen="127.0.0.1:0",
                    retention_interval_s=0)
    with _ingest(config, folder) as url:
        yield url


@contextmanager
def _ingest(config: Config, folder: Path) -> Iterator[str]:
    """Run `python -m hookline.ingest` with `config`, logging to `folder`; yield its base URL. On
    exit stop it, and fail if it logged an unexpected error (`request_failed`)."""
    log_path = folder / "ingest.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with log_path.open("ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "hookline.ingest", "--config-json",
                                 config.to_json()], stdout=log, stderr=subprocess.STDOUT,
                                env=env, cwd=ROOT)
    try:
        port = _listening_port(proc, log_path)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    failures = [line for line in log_path.read_text().splitlines()
                if '"request_failed"' in line]
    assert not failures, "unexpected errors in the ingest log:\n" + "\n".join(failures)


def _listening_port(proc: subprocess.Popen[bytes], log_path: Path) -> int:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"ingest exited {proc.returncode}: {log_path.read_text()}")
        for line in log_path.read_text().splitlines():
            if line.startswith("{") and (entry := json.loads(line))["event"] == "ingest_listening":
                return int(entry["port"])
        time.sleep(0.02)
    raise AssertionError("ingest did not start listening")


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


def _auth_for(case: schemathesis.Case) -> dict[str, str]:
    """The bearer token the operation's security scheme asks for (none for open routes)."""
    schemes = {name for requirement in case.operation.definition.raw.get("security", [])
               for name in requirement}
    if "adminToken" in schemes:
        return {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    if "ingestToken" in schemes:
        return {"Authorization": f"Bearer {INGEST_TOKEN}"}
    if "tenantToken" in schemes:
        return {"Authorization": f"Bearer {TENANT_TOKEN['token']}"}
    return {}


def _protected_operations() -> list[Any]:
    """Every documented operation that names a bearer scheme (adminToken, ingestToken or
    tenantToken)."""
    operations = [result.ok() for result in SCHEMA.get_all_operations()]
    return [op for op in operations
            if {name for requirement in op.definition.raw.get("security", [])
                for name in requirement} & {"adminToken", "ingestToken", "tenantToken"}]


@pytest.mark.parametrize("operation", _protected_operations(), ids=lambda op: op.label)
def test_protected_operations_refuse_without_a_valid_token(operation, base_url, tokenless_url,
                                                            session):
    """A missing, wrong or non-Bearer token gets the documented 401 `unauthorized` (with
    `WWW-Authenticate: Bearer`); a server with no token configured gets the documented 403
    `auth_not_configured`, even for the right token. Both come before any input is read, so
    the request carries none. A tenant API operation answers the tenant codes instead:
    `token_missing`, `token_invalid`, and `token_invalid` on the second ingest, whose
    database signs with another key."""
    case = operation.Case(path_parameters={p.name: "1" for p in operation.path_parameters})
    right = _auth_for(case)
    tenant = case.path.startswith("/v1/tenant")
    for url, headers, status, code in (
            (base_url, {}, 401, "token_missing" if tenant else "unauthorized"),
            (base_url, {"Authorization": "Bearer not-the-token"}, 401,
             "token_invalid" if tenant else "unauthorized"),
            (base_url, {"Authorization": right["Authorization"].replace("Bearer", "Basic")},
             401, "token_missing" if tenant else "unauthorized"),
            (tokenless_url, right, *((401, "token_invalid") if tenant
                                     else (403, "auth_not_configured")))):
        response = case.call_and_validate(base_url=url, session=session, headers=headers,
                                          checks=CHECKS, timeout=10)
        assert (response.status_code, response.json()["error"]) == (status, code), headers


@SCHEMA.parametrize()
def test_running_server_matches_its_openapi_document(case, base_url, session):
    """Every generated request gets a documented status, content type, headers and body
    (and never a 5xx) from the running server."""
    checks = CHECKS
    if case.path == "/readyz":
        # The seeded supervisor status has no healthy worker, so ingest is rightly not ready:
        # its documented 503 is the answer under test (its body is still checked against
        # NotReady).
        checks = [c for c in CHECKS if c is not st_checks.not_a_server_error]
    response = case.call_and_validate(base_url=base_url, session=session,
                                      headers=_auth_for(case), checks=checks, timeout=10)
    if case.path.startswith("/v1/tenant"):  # past the token checks, or nothing was tested
        assert response.status_code != 401, response.text


def test_served_document_is_the_packaged_file(base_url):
    """GET /openapi.json (no token) serves ingest/openapi.json byte for byte, and the
    document lists every route the app registers, with every method."""
    with urllib.request.urlopen(f"{base_url}/openapi.json", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        served = resp.read()
    assert served == OPENAPI_PATH.read_bytes() == openapi_bytes()
    document = json.loads(served)
    documented = {(method.upper(), path) for path, item in document["paths"].items()
                  for method in item}
    assert documented == registered_routes()


def registered_routes() -> set[tuple[str, str]]:
    """(METHOD, path) of every route the ingest app registers (HEAD twins of GET left out)."""
    from hookline.ingest.app import build_app

    app = build_app(_NoStore(), Config())  # type: ignore[arg-type]  (routes only)
    return {(route.method, route.resource.canonical) for route in app.router.routes()
            if route.method != "HEAD" and route.resource is not None}


class _NoStore:
    """Stands in for a store when only the route table is read: building the app may take
    its bound methods (the group committer keeps `add_events`), calling one fails."""

    def __getattr__(self, name: str) -> Any:
        def never_called(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"the store was used: {name}")

        return never_called


def test_the_tenant_token_opens_the_tenant_api(base_url, session):
    """The tenant token the schemathesis run sends is accepted (so the tenant operations are
    exercised past the token checks, not only refused)."""
    response = session.get(f"{base_url}/v1/tenant", timeout=10,
                           headers={"Authorization": f"Bearer {TENANT_TOKEN['token']}"})
    assert response.status_code == 200, response.text
    assert response.json()["tenant"]["id"] == "_default"
    assert response.json()["capabilities"] == list(CAPABILITIES)
