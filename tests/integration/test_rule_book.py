"""One bad value, one message: the CLI, the admin API (the real ingest app on 127.0.0.1) and
the store (each backend) refuse it with the rule book's text and field name; the CLI exits 2.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import structlog
from aiohttp.test_utils import TestClient, TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.errors import InvalidSetting
from hookline.shared.policy import rules
from hookline.shared.signing import generate_secret
from hookline.shared.store import Store
from hookline.supervisor.cli import main as cli_main
from tests.conftest import opened_store

TOKEN = "t0ken-for-tests"
SECRET = generate_secret()
GOOD_URL = "http://127.0.0.1:9/h"
CRLF_VALUE = "1\r\nX-Injected: 1"


def _add(**fields: Any) -> dict[str, Any]:
    """A destination to add: valid except for `fields`."""
    return {"name": "billing", "url": GOOD_URL, "secret": SECRET, "event_types": ["*"],
            "max_in_flight": 10, "headers": {}, **fields}


@dataclass
class Case:
    """One invalid input, spelled for each entry point."""

    field: str
    rule: Callable[[], object]                     # the rule book applied to the input
    cli: list[str]                                 # hookline arguments after --db URL
    api: tuple[str, str, dict[str, Any]]           # method, path, JSON body
    store: Callable[[Store], Awaitable[object]] | None = None
    needs_destination: bool = field(default=False)


def _add_case(cli_tail: list[str], **bad: Any) -> Case:
    dest = _add(**bad)
    return Case(
        field=next(iter(bad)),
        rule=lambda: rules.new_destination(**dest),
        cli=["destinations", "add", dest["name"], dest["url"], "--secret", SECRET, *cli_tail],
        api=("POST", "/v1/admin/destinations", dest),
        store=lambda s: s.add_destination(**dest))


CASES = {
    "name with the removed mark": _add_case([], name="billing~removed-1"),
    "url not http": _add_case([], url="ftp://example.com/"),
    "url without a host": _add_case([], url="http://"),
    "header value with CR LF": _add_case(["--header", f"X-A: {CRLF_VALUE}"],
                                         headers={"X-A": CRLF_VALUE}),
    "reserved header": _add_case(["--header", "Webhook-Signature: v1,forged"],
                                 headers={"Webhook-Signature": "v1,forged"}),
    "max_in_flight 0": _add_case(["--max-in-flight", "0"], max_in_flight=0),
    "bad event-type pattern": _add_case(["--event-type", "invoice.**"],
                                        event_types=["invoice.**"]),
    "rate limit zero": _add_case(["--rate-limit", "0"], rate_limit_per_s=0.0),
    "malformed secret": Case(
        field="secret",
        rule=lambda: rules.new_destination(**_add(secret="whsec_!!")),
        cli=["destinations", "add", "billing", GOOD_URL, "--secret", "whsec_!!"],
        api=("POST", "/v1/admin/destinations", _add(secret="whsec_!!")),
        store=lambda s: s.add_destination(**_add(secret="whsec_!!"))),
    "update max_in_flight 0": Case(
        field="max_in_flight",
        rule=lambda: rules.destination_changes({"max_in_flight": 0}),
        cli=["destinations", "update", "d", "--max-in-flight", "0"],
        api=("PATCH", "/v1/admin/destinations/d", {"max_in_flight": 0}),
        store=lambda s: s.update_destination("d", max_in_flight=0), needs_destination=True),
    "update timeout_s negative": Case(
        field="timeout_s",
        rule=lambda: rules.destination_changes({"timeout_s": -1}),
        cli=["destinations", "update", "d", "--set", "timeout_s=-1"],
        api=("PATCH", "/v1/admin/destinations/d", {"timeout_s": -1}),
        store=lambda s: s.update_destination("d", timeout_s=-1), needs_destination=True),
    "update unknown field": Case(
        field="secretz",
        rule=lambda: rules.destination_changes({"secretz": 1}),
        cli=["destinations", "update", "d", "--set", "secretz=1"],
        api=("PATCH", "/v1/admin/destinations/d", {"secretz": 1}),
        store=lambda s: s.update_destination("d", secretz=1), needs_destination=True),
    "rotation overlap past 7 days": Case(
        field="overlap_s",
        rule=lambda: rules.rotation_overlap(8 * 86400.0),
        cli=["destinations", "rotate-secret", "d", "--overlap", "8d"],
        api=("POST", "/v1/admin/destinations/d/rotate-secret", {"overlap_s": 8 * 86400.0}),
        store=lambda s: s.rotate_secret("d", generate_secret(), 8 * 86400.0),
        needs_destination=True),
    "purge ages out of order": Case(
        field="bodies_older_than",
        rule=lambda: rules.retention_ages("40d", "30d", "90d"),
        cli=["purge", "--bodies-older-than", "40d"],
        api=("POST", "/v1/admin/purge", {"bodies_older_than": "40d"})),
    "purge age not a duration": Case(
        field="dedupe_keep",
        rule=lambda: rules.retention_ages("7d", "30d", "soon"),
        cli=["purge", "--dedupe-keep", "soon"],
        api=("POST", "/v1/admin/purge", {"dedupe_keep": "soon"})),
    "source name with a slash": Case(
        field="name",
        rule=lambda: rules.new_source("a/b", "token", "t" * 20),
        cli=["sources", "add", "a/b", "--scheme", "token", "--secret", "t" * 20],
        api=("POST", "/v1/admin/sources", {"name": "a/b", "scheme": "token",
                                           "secret": "t" * 20}),
        store=lambda s: s.add_source(name="a/b", scheme="token", secret="t" * 20)),
    "source secret too short": Case(
        field="secret",
        rule=lambda: rules.new_source("gh", "github", "short"),
        cli=["sources", "add", "gh", "--scheme", "github", "--secret", "short"],
        api=("POST", "/v1/admin/sources", {"name": "gh", "scheme": "github",
                                           "secret": "short"}),
        store=lambda s: s.add_source(name="gh", scheme="github", secret="short")),
}


def _rule_message(case: Case) -> str:
    with pytest.raises(InvalidSetting) as refused:
        case.rule()
    assert refused.value.field == case.field
    return str(refused.value)


async def _api_and_store(store_url: str, case: Case, expected: str) -> None:
    async with opened_store(store_url) as store:
        app = build_app(store, Config(admin_token=TOKEN, allow_networks="127.0.0.0/8"))
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            method, path, body = case.api
            async with client.request(method, path, json=body,
                                      headers={"Authorization": f"Bearer {TOKEN}"}) as resp:
                answer = await resp.json()
                assert resp.status == 400, answer
        assert answer == {"error": "invalid_request", "field": case.field, "detail": expected}
        if case.store is not None:
            with pytest.raises(InvalidSetting) as refused:
                await case.store(store)
            assert (refused.value.field, str(refused.value)) == (case.field, expected)
        assert [d.name for d in await store.list_destinations()] == (
            ["d"] if case.needs_destination else [])
        assert await store.list_sources() == []


async def _add_destination_d(store_url: str) -> None:
    async with opened_store(store_url) as store:
        await store.add_destination(name="d", url=GOOD_URL, secret=SECRET, event_types=["*"],
                                    max_in_flight=3)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_same_bad_value_gets_the_same_message_everywhere(store_url: str, case: Case,
                                                          capsys: pytest.CaptureFixture[str]):
    """The CLI prints the rule book's message (plus the flag) and exits 2; the admin API
    answers 400 with the same text and the field; the store raises the same InvalidSetting;
    nothing is stored."""
    expected = _rule_message(case)
    if case.needs_destination:
        asyncio.run(_add_destination_d(store_url))
    try:
        code = cli_main(["--db", store_url, *case.cli])
    finally:
        structlog.reset_defaults()  # the CLI pointed the logs at the captured stderr
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"hookline: {expected}") and err.count("\n") == 1, err
    asyncio.run(_api_and_store(store_url, case, expected))
