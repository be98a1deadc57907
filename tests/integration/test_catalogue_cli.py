"""`hookline event-types ...` and the catalogue check of `destinations add|update`, run
in-process on a real database (each backend in turn): put with a schema as the next version,
list, archive, remove, OpenAPI export then import into another catalogue, and the exit codes
(2 bad input or a subscription no type matches, 1 not found)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from hookline.supervisor.cli.main import main as hookline_main
from tests.conftest import opened_store

URL = "http://127.0.0.1:9/h"
SCHEMA = {"type": "object", "properties": {"amount": {"type": "integer"}},
          "required": ["amount"]}


@pytest.fixture
def cli(store_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run `hookline --db URL ARGS` in-process: (exit code, stdout, stderr)."""
    monkeypatch.setenv("HOOKLINE_ALLOW_NETWORKS", "127.0.0.0/8")
    asyncio.run(_create(store_url))

    def run(*args: str, db: str = store_url) -> tuple[int, str, str]:
        capsys.readouterr()
        code = hookline_main(["--db", db, *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


async def _create(url: str) -> None:
    async with opened_store(url):
        pass


def test_event_type_commands(cli, tmp_path: Path):
    schema, example = tmp_path / "schema.json", tmp_path / "example.json"
    schema.write_text(json.dumps(SCHEMA))
    example.write_text('{"amount": 3}')
    code, out, err = cli("event-types", "put", "invoice.paid", "--description", "paid",
                         "--schema", str(schema), "--example", str(example),
                         "--validation", "reject", "--json")
    assert code == 0, err
    assert json.loads(out)["examples"] == {"1": {"amount": 3}}
    code, out, _ = cli("event-types", "put", "invoice.paid", "--schema", str(schema), "--json")
    assert json.loads(out)["latest_version"] == 2 and json.loads(out)["description"] == "paid"
    assert cli("event-types", "put", "invoice.voided", "--deprecated")[0] == 0
    code, out, _ = cli("event-types", "list")
    assert code == 0 and "invoice.paid" in out and "invoice.voided" in out

    # Subscriptions: a misspelt type exits 2 naming the nearest; a deprecated one warns.
    code, _, err = cli("destinations", "add", "d", URL, "--event-type", "invoice.payed")
    assert code == 2 and "did you mean 'invoice.paid'" in err
    code, _, err = cli("destinations", "add", "d", URL, "--event-type", "invoice.voided")
    assert code == 0 and "warning: event type 'invoice.voided' is deprecated" in err
    assert cli("destinations", "update", "d", "--event-type", "user.*")[0] == 2
    assert cli("event-types", "archive", "invoice.voided")[0] == 0
    # Kept by the destination that had it; refused as a new subscription.
    assert cli("destinations", "update", "d", "--event-type", "invoice.voided")[0] == 0
    assert cli("destinations", "add", "e", URL, "--event-type", "invoice.voided")[0] == 2

    exported = tmp_path / "webhooks.json"
    assert cli("event-types", "archive", "invoice.voided", "--restore")[0] == 0
    assert cli("event-types", "export", "--out", str(exported))[0] == 0
    document = json.loads(exported.read_text())
    assert sorted(document["webhooks"]) == ["invoice.paid", "invoice.voided"]
    other = str(tmp_path / "other.db")
    asyncio.run(_create(other))
    code, out, _ = cli("event-types", "import", str(exported), "--json", db=other)
    assert json.loads(out)["created"] == ["invoice.paid", "invoice.voided"]
    code, out, _ = cli("event-types", "get", "invoice.paid", db=other)
    assert json.loads(out)["schemas"] == {"1": SCHEMA}
    assert json.loads(out)["validation"] == "reject"

    assert cli("event-types", "remove", "invoice.voided")[0] == 0
    assert cli("event-types", "remove", "invoice.voided")[0] == 1
    assert cli("event-types", "put", "a*b")[0] == 2
    assert cli("event-types", "put", "x", "--example", str(example))[0] == 2
    assert cli("event-types", "import", str(tmp_path / "missing.json"))[0] == 2


def test_hookline_event_shows_the_schema_mark(cli, store_url: str):
    """An event accepted under `warn` with a mismatch shows it in `hookline event`."""
    from hookline.shared.models import NewEvent

    async def publish() -> None:
        async with opened_store(store_url) as store:
            await store.add_event(NewEvent(source="api", source_event_id="e1",
                                           type="order.created", body=b"{}",
                                           schema_problem="/data/order fails `type`"))
    asyncio.run(publish())
    code, out, _ = cli("event", "e1")
    assert code == 0 and "/data/order fails `type`" in out and "schema" in out
