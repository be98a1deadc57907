"""`hookline tenants ...` and `--tenant` on the destination, control and event commands, run
in-process on a real database (each backend in turn): exit codes (2 bad input naming the
flag, 1 not found or refused), `--json` shapes, audit lines, and same-named destinations of
two tenants kept apart."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from hookline.shared.models import DEFAULT_TENANT, AttemptResult, Dead, Retry
from hookline.supervisor.cli.main import main as hookline_main
from tests.conftest import new_event, opened_store

URL = "http://127.0.0.1:9/h"
SECRET = "whsec_" + "B" * 32


@pytest.fixture
def cli(store_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run `hookline --db URL ARGS` in-process: (exit code, stdout, stderr)."""
    monkeypatch.setenv("HOOKLINE_ALLOW_NETWORKS", "127.0.0.0/8")
    asyncio.run(_create(store_url))

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()  # drop what the test's own store logged
        code = hookline_main(["--db", store_url, *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


async def _create(url: str) -> None:
    async with opened_store(url):
        pass


def ok_json(cli: Any, *args: str) -> Any:
    code, out, err = cli(*args, "--json")
    assert code == 0, (args, err)
    return json.loads(out)


def test_tenants_commands(cli):
    created = ok_json(cli, "tenants", "put", "acme", "--name", "Acme Inc", "--metadata",
                      '{"plan": "pro"}', "--max-destinations", "1")
    assert {k: created[k] for k in ("id", "name", "metadata", "max_destinations", "disabled",
                                    "destinations")} == {
        "id": "acme", "name": "Acme Inc", "metadata": {"plan": "pro"},
        "max_destinations": 1, "disabled": False, "destinations": 0}
    code, out, err = cli("tenants", "disable", "acme")
    assert code == 0 and "updated tenant acme (disabled)" in out
    assert json.loads(err.splitlines()[-1])["event"] == "tenant_put"
    assert ok_json(cli, "tenants", "show", "acme")["disabled"] is True
    assert ok_json(cli, "tenants", "enable", "acme")["disabled"] is False
    assert ok_json(cli, "tenants", "put", "acme", "--max-destinations", "none")[
        "max_destinations"] is None
    for tenant in ("beta", "acme-2"):
        assert cli("tenants", "put", tenant)[0] == 0
    page = ok_json(cli, "tenants", "list", "--limit", "2")
    assert [t["id"] for t in page["tenants"]] == ["_default", "acme"]
    assert page["next_after"] == "acme"
    code, out, _ = cli("tenants", "list", "--after", "acme")
    assert code == 0 and "acme-2" in out and "beta" in out and "Acme Inc" not in out
    assert [t["id"] for t in ok_json(cli, "tenants", "list", "--prefix", "acme")[
        "tenants"]] == ["acme", "acme-2"]

    for bad, named in ((("tenants", "put", "no spaces"), "id"),
                       (("tenants", "put", "_mine"), "reserved"),
                       (("tenants", "put", "acme", "--metadata", "[1"), "--metadata"),
                       (("tenants", "put", "acme", "--metadata", "[1]"), "--metadata"),
                       (("tenants", "put", "acme", "--max-destinations", "-3"),
                        "--max-destinations"),
                       (("tenants", "disable", "_default"), "default tenant"),
                       (("tenants", "list", "--limit", "0"), "limit"),
                       (("destinations", "list", "--tenant", "a b"), "--tenant")):
        code, _, err = cli(*bad)
        assert code == 2 and named in err, (bad, err)
    code, _, err = cli("tenants", "show", "ghost")
    assert code == 1 and "ghost" in err
    code, _, err = cli("tenants", "delete", "_default")
    assert code == 1 and "default tenant" in err


def test_tenant_flag_on_destination_and_event_commands(cli, store_url, capsys):
    assert cli("tenants", "put", "acme")[0] == 0
    for tenant in ("acme", None):  # `hooks` in acme and in the default tenant
        added = ok_json(cli, "destinations", "add", "hooks", URL, "--secret", SECRET,
                        *(("--tenant", tenant) if tenant else ()))
        assert added["tenant"] == (tenant or "_default")
    code, _, err = cli("destinations", "add", "x", URL, "--tenant", "ghost")
    assert code == 1 and "ghost" in err
    every = ok_json(cli, "destinations", "list")
    assert sorted((d["tenant"], d["name"]) for d in every) == [
        ("_default", "hooks"), ("acme", "hooks")]
    code, out, _ = cli("destinations", "list", "--tenant", "acme")
    assert code == 0 and "TENANT" in out and "_default" not in out

    # Confirmations name a tenant's destination with its tenant (both have a `hooks`).
    assert cli("pause", "hooks", "--tenant", "acme", "--reason", "theirs")[:2] == (
        0, "paused hooks (tenant acme) (theirs)\n")
    assert ok_json(cli, "destinations", "show", "hooks", "--tenant", "acme")["paused"]
    assert not ok_json(cli, "destinations", "show", "hooks")["paused"]
    assert cli("resume", "hooks", "--tenant", "acme")[:2] == (
        0, "resumed hooks (tenant acme); brought forward 0 job(s) waiting for a retry\n")
    assert cli("resume", "hooks")[:2] == (
        0, "resumed hooks; brought forward 0 job(s) waiting for a retry\n")
    assert ok_json(cli, "destinations", "update", "hooks", "--tenant", "acme",
                   "--max-in-flight", "3")["max_in_flight"] == 3
    assert ok_json(cli, "destinations", "show", "hooks")["max_in_flight"] != 3
    code, out, err = cli("destinations", "secret", "hooks", "--tenant", "acme")
    assert code == 0 and out.strip() == SECRET
    assert json.loads(err.splitlines()[-1])["tenant"] == "acme"
    code, _, err = cli("destinations", "show", "hooks", "--tenant", "ghost")
    assert code == 1 and "ghost" in err

    asyncio.run(_dead_letter_each(store_url))
    acme_dead = ok_json(cli, "dead", "--destination", "hooks", "--tenant", "acme")
    default_dead = ok_json(cli, "dead", "--destination", "hooks")
    assert len(acme_dead) == len(default_dead) == 1
    assert acme_dead[0]["id"] != default_dead[0]["id"]
    events = ok_json(cli, "events", "--tenant", "acme")["events"]
    assert [j["id"] for e in events for j in e["jobs"]] == [acme_dead[0]["id"]]
    found = ok_json(cli, "event", "e1", "--tenant", "acme")
    assert [j["id"] for j in found["jobs"]] == [acme_dead[0]["id"]]
    assert ok_json(cli, "replay", "--all-dead", "--tenant", "acme", "--dry-run")["count"] == 1
    code, _, err = cli("replay", "--job", "1", "--tenant", "acme")
    assert code == 2 and "--tenant" in err
    resent = ok_json(cli, "resend", "--destination", "hooks", "--tenant", "acme")
    assert resent["job_ids"] == [acme_dead[0]["id"]]
    assert ok_json(cli, "dead", "--destination", "hooks") == default_dead
    acme_jobs = ok_json(cli, "jobs", "--tenant", "acme")
    assert [(j["id"], j["tenant"]) for j in acme_jobs] == [(acme_dead[0]["id"], "acme")]
    assert {j["tenant"] for j in ok_json(cli, "jobs")} == {"acme", "_default"}
    code, _, err = cli("jobs", "--tenant", "ghost")
    assert code == 1 and "ghost" in err

    dry = ok_json(cli, "tenants", "delete", "acme", "--dry-run")
    assert dry == {"tenant": "acme", "destinations": 1, "unfinished_jobs": 1,
                   "dry_run": True}
    code, out, err = cli("tenants", "delete", "acme")
    assert code == 0 and "removed tenant acme: 1 destination(s), 1 unfinished" in out
    [audit] = [json.loads(line) for line in err.splitlines() if "tenant_deleted" in line]
    assert (audit["tenant"], audit["by"], audit["unfinished_jobs"]) == ("acme", "operator", 1)
    assert [d["tenant"] for d in ok_json(cli, "destinations", "list")] == ["_default"]


async def _dead_letter_each(url: str) -> None:
    """One event for each tenant's `hooks` (the same sender's id), both jobs dead."""
    async with opened_store(url) as store:
        await store.add_event(new_event("e1"))
        await store.add_event(new_event("e1", tenant="acme"))
        claims = await store.claim("w1", 10, 30.0, 5)
        await store.finish([(c, Dead(error="gone"), AttemptResult(
            started_at=await store.now_s(), duration_s=0.01, status_code=410))
            for c in claims])


BY_DESTINATION = (("dead",), ("events",), ("resend", "--dry-run"), ("retry-now", "--dry-run"),
                  ("replay", "--all-dead", "--dry-run"), ("jobs",))
"""The commands filtered by `--destination NAME` (of `--tenant`, default the default
tenant's), with what keeps them from changing anything."""


def test_a_destination_name_the_tenant_lacks_is_not_found_not_an_empty_answer(cli):
    """`--destination billing` where only acme has a `billing`: each command filtered by it
    exits 1 naming the destination, the tenant it looked in (the default one without
    --tenant) and acme, with the hint to pass --tenant; none answers an empty list with
    exit 0 (dead and events did). With `--tenant acme` each answers as before; bad input
    is still exit 2, checked before the lookup."""
    for tenant in ("acme", "globex"):
        ok_json(cli, "tenants", "put", tenant)
    ok_json(cli, "destinations", "add", "billing", URL, "--tenant", "acme")
    for command in BY_DESTINATION:
        for given, where in (((), "the default tenant (_default)"),
                             (("--tenant", "_default"), "the default tenant (_default)"),
                             (("--tenant", "globex"), "tenant globex")):
            code, out, err = cli(*command, "--destination", "billing", *given)
            assert (code, out) == (1, ""), (command, given, out)
            assert err.strip() == (f"hookline: no destination named 'billing' in {where}; "
                                   "tenant acme has one: pass --tenant acme"), (command, err)
        code, _, err = cli(*command, "--destination", "billing", "--tenant", "acme", "--json")
        assert code == 0, (command, err)
    code, _, err = cli("dead", "--destination", "nobody")
    assert code == 1 and err.strip() == ("hookline: no destination named 'nobody' in the "
                                         "default tenant (_default), nor in any other tenant")
    # A removed one: where its jobs went (the name it keeps), whichever tenant is looked in.
    gone = ok_json(cli, "destinations", "add", "gone", URL, "--tenant", "acme")["id"]
    assert cli("destinations", "remove", "gone", "--tenant", "acme")[0] == 0
    code, _, err = cli("dead", "--destination", "gone", "--tenant", "acme")
    assert code == 1 and err.strip() == (
        "hookline: no destination named 'gone' in tenant acme, nor in any other tenant; one "
        f"was removed: its jobs are under 'gone~removed-{gone}'"), err
    removed = [gone]
    for _ in range(3):
        removed.append(ok_json(cli, "destinations", "add", "gone", URL, "--tenant",
                               "acme")["id"])
        assert cli("destinations", "remove", "gone", "--tenant", "acme")[0] == 0
    code, _, err = cli("dead", "--destination", "gone", "--tenant", "acme")
    newest = ", ".join(f"'gone~removed-{i}'" for i in reversed(removed[1:]))
    assert code == 1 and err.strip().endswith(
        f"; 4 were removed: their jobs are under {newest} and 1 more"), err
    code, _, err = cli("dead", "--destination", "gone")
    assert code == 1 and "removed" not in err, err  # not the default tenant's
    assert cli("dead", "--destination", f"gone~removed-{gone}", "--tenant", "acme")[0] == 0
    code, _, err = cli("events", "--destination", "billing", "--tenant", "ghost")
    assert code == 1 and "ghost" in err  # the tenant itself is unknown
    for command in (("events", "--limit", "0"), ("resend", "--limit", "0")):
        code, _, err = cli(*command, "--destination", "billing")  # bad input comes first
        assert code == 2 and "limit: must be from 1" in err, (command, err)


DELETED_NOTE = ("hookline: note: tenant acme was deleted: listing its history, kept until "
                "retention (read-only: nothing can be changed for it)")
REFUSED_DELETED = ("hookline: no tenant 'acme': it was deleted, so it has no destinations or "
                   "stats and nothing can be changed for it; its events and jobs are kept "
                   "until retention, read-only: the dead "
                   "letter, job and event listings filtered by this tenant still show them")


def test_a_deleted_tenants_history_is_listed_by_its_id_read_only(cli, store_url):
    """acme is deleted while its event's job is dead: `dead`, `jobs`, `events` and `event`
    with `--tenant acme` list its kept history (exit 0, a note on stderr saying it was
    deleted, stdout the usual listing); an id never used is the same exit 1 `no tenant` as
    before; every write naming acme stays refused (exit 1) saying it was deleted and where
    its history is read."""
    ok_json(cli, "tenants", "put", "acme")
    for tenant in ("acme", None):
        ok_json(cli, "destinations", "add", "hooks", URL, "--secret", SECRET,
                *(("--tenant", tenant) if tenant else ()))
    asyncio.run(_dead_letter_each(store_url))
    assert cli("tenants", "delete", "acme")[0] == 0

    code, out, err = cli("dead", "--tenant", "acme", "--json")
    assert (code, err.strip()) == (0, DELETED_NOTE), err
    [dead] = json.loads(out)
    assert dead["tenant"] == "acme" and dead["destination"].startswith("hooks~removed-")
    code, out, err = cli("jobs", "--tenant", "acme", "--json")
    assert (code, err.strip()) == (0, DELETED_NOTE)
    assert [(j["id"], j["status"]) for j in json.loads(out)] == [(dead["id"], "dead")]
    code, out, err = cli("events", "--tenant", "acme", "--json")
    assert (code, err.strip()) == (0, DELETED_NOTE)
    assert [e["tenant"] for e in json.loads(out)["events"]] == ["acme"]
    code, out, err = cli("event", "e1", "--tenant", "acme", "--json")
    assert (code, err.strip()) == (0, DELETED_NOTE)
    assert [j["id"] for j in json.loads(out)["jobs"]] == [dead["id"]]
    code, out, err = cli("dead", "--tenant", "acme")  # the text table
    assert code == 0 and dead["destination"] in out and err.strip() == DELETED_NOTE
    # A plain name acme had: the removed one's name, as for a live tenant.
    code, _, err = cli("dead", "--tenant", "acme", "--destination", "hooks")
    assert code == 1 and err.strip().endswith(
        f"one was removed: its jobs are under {dead['destination']!r}"), err

    for listing in (("dead",), ("jobs",), ("events",), ("event", "e1")):
        assert cli(*listing, "--tenant", "ghost")[::2] == (1, "hookline: no tenant 'ghost'\n")

    writes = (("replay", "--all-dead", "--dry-run"),
              ("resend", "--destination", dead["destination"], "--dry-run"),
              ("retry-now", "--destination", dead["destination"], "--dry-run"),
              ("pause", dead["destination"]), ("destinations", "add", "new", URL),
              ("stats",))
    for write in writes:
        code, out, err = cli(*write, "--tenant", "acme")
        assert (code, out, err.strip()) == (1, "", REFUSED_DELETED), (write, err)
    assert ok_json(cli, "dead", "--tenant", "acme") == [dead]  # nothing changed


def test_a_deleted_tenants_destination_named_without_tenant_leads_to_its_history(cli,
                                                                                store_url):
    """`--destination hooks~removed-N` without `--tenant`, where only the deleted acme had
    it: the not-found message marks acme deleted and says to pass `--tenant acme`, and
    doing so lists its history (it said acme was deleted before: a loop). A write filtered
    so is refused, saying acme was deleted."""
    ok_json(cli, "tenants", "put", "acme")
    ok_json(cli, "destinations", "add", "hooks", URL, "--secret", SECRET, "--tenant", "acme")
    ok_json(cli, "destinations", "add", "hooks", URL, "--secret", SECRET)
    asyncio.run(_dead_letter_each(store_url))
    assert cli("tenants", "delete", "acme")[0] == 0
    [dead] = ok_json(cli, "dead", "--tenant", "acme")
    removed = dead["destination"]
    for listing in (("dead",), ("jobs",), ("events",)):
        code, out, err = cli(*listing, "--destination", removed)
        assert (code, out) == (1, ""), (listing, out)
        assert err.strip() == (f"hookline: no destination named {removed!r} in the default "
                               "tenant (_default); tenant acme (deleted) has one: pass "
                               "--tenant acme"), (listing, err)
        code, out, err = cli(*listing, "--destination", removed, "--tenant", "acme", "--json")
        assert (code, err.strip()) == (0, DELETED_NOTE), (listing, err)
        listed = json.loads(out)
        assert len(listed["events"] if listing == ("events",) else listed) == 1, listing
    code, _, err = cli("resend", "--destination", removed, "--tenant", "acme", "--dry-run")
    assert (code, err.strip()) == (1, REFUSED_DELETED)


BY_NAME = (("pause", "billing"), ("resume", "billing"), ("destinations", "show", "billing"),
           ("destinations", "update", "billing", "--max-in-flight", "3"),
           ("destinations", "remove", "billing"), ("destinations", "rotate-secret", "billing"),
           ("destinations", "secret", "billing"),
           ("destinations", "expire-previous-secret", "billing"),
           ("destinations", "filter-test", "billing"), ("destinations", "test", "billing"))
"""The commands that name a destination as their argument (of `--tenant`, default the
default tenant's)."""


def test_a_destination_argument_the_tenant_lacks_names_the_tenants_that_have_it(cli):
    """`hookline pause billing` (and every command naming a destination) where only acme
    has a `billing`: exit 1 with the same message as `--destination`, naming acme and the
    hint, and acme's `billing` is left as it was; with `--tenant acme` the command works."""
    ok_json(cli, "tenants", "put", "acme")
    added = ok_json(cli, "destinations", "add", "billing", URL, "--tenant", "acme")
    for command in BY_NAME:
        code, out, err = cli(*command)
        assert (code, out) == (1, ""), (command, out)
        assert err.strip() == ("hookline: no destination named 'billing' in the default "
                               "tenant (_default); tenant acme has one: pass --tenant acme"), (
            command, err)
    [kept] = ok_json(cli, "destinations", "list", "--tenant", "acme")
    assert (kept["name"], kept["paused"], kept["max_in_flight"]) == (
        "billing", False, added["max_in_flight"])
    code, _, err = cli("pause", "billing", "--tenant", "acme")
    assert code == 0, err
    [paused] = ok_json(cli, "destinations", "list", "--tenant", "acme")
    assert paused["paused"] is True


def test_many_tenants_with_the_name_are_listed_a_few_then_counted(cli):
    """Five tenants have a `billing`, the default one none: the message lists the first
    three ids and counts the rest, and asks for --tenant ID."""
    for tenant in ("acme", "beta", "delta", "epsilon", "zeta"):
        ok_json(cli, "tenants", "put", tenant)
        ok_json(cli, "destinations", "add", "billing", URL, "--tenant", tenant)
    code, out, err = cli("events", "--destination", "billing")
    assert (code, out) == (1, "")
    assert err.strip() == ("hookline: no destination named 'billing' in the default tenant "
                           "(_default); tenants acme, beta, delta and 2 more have one: pass "
                           "--tenant ID")


def test_a_removed_destinations_dead_letters_are_still_listed_by_its_removed_name(
        cli, store_url):
    """`hookline dead` lists a removed destination's jobs under `NAME~removed-ID`: that
    name still filters them (`dead`, `events`), while the freed plain name is not found."""
    ok_json(cli, "destinations", "add", "gone", URL)

    async def publish() -> None:
        async with opened_store(store_url) as store:
            await store.add_event(new_event("e1"))
    asyncio.run(publish())
    assert cli("destinations", "remove", "gone")[0] == 0
    [dead] = ok_json(cli, "dead")
    assert dead["destination"].startswith("gone~removed-")
    assert ok_json(cli, "dead", "--destination", dead["destination"]) == [dead]
    assert len(ok_json(cli, "events", "--destination", dead["destination"])["events"]) == 1
    code, _, err = cli("dead", "--destination", "gone")
    assert code == 1 and "no destination named 'gone'" in err


def test_a_test_delivery_to_a_paused_destination_says_so_at_once(cli):
    """`hookline destinations test` of a paused destination does not wait out the attempt
    timeout: it names the pause and exits 1 (the job waits for the resume)."""
    ok_json(cli, "destinations", "add", "held", URL, "--secret", SECRET)
    assert cli("pause", "held", "--reason", "maintenance")[0] == 0
    code, out, _ = cli("destinations", "test", "held")
    assert code == 1 and "'held' is paused (maintenance)" in out and "hookline resume" in out


def test_stats_counts_one_tenants_destinations(cli, store_url):
    """`hookline stats --tenant ID`: the per-destination counts and the paused list are that
    tenant's (two tenants' `billing` never mixed); without it the default tenant's; an
    unknown tenant is exit 1 naming it, a malformed id exit 2 naming the flag."""
    for tenant in ("acme", "globex"):
        ok_json(cli, "tenants", "put", tenant)
        ok_json(cli, "destinations", "add", "billing", URL, "--tenant", tenant)

    async def publish() -> None:
        async with opened_store(store_url) as store:
            await store.add_events([new_event(f"a{i}", tenant="acme") for i in range(2)]
                                   + [new_event("g1", tenant="globex")])
    asyncio.run(publish())
    assert cli("pause", "billing", "--tenant", "globex", "--reason", "globex asked")[0] == 0
    acme, globex = ok_json(cli, "stats", "--tenant", "acme"), ok_json(cli, "stats", "--tenant",
                                                                      "globex")
    assert (acme["tenant"], acme["jobs_by_destination"], acme["paused_destinations"]) == (
        "acme", {"billing": {"pending": 2}}, {})
    assert (globex["jobs_by_destination"], globex["paused_destinations"]) == (
        {"billing": {"pending": 1}}, {"billing": "globex asked"})
    default = ok_json(cli, "stats")
    assert (default["tenant"], default["jobs_by_destination"]) == ("_default", {})
    code, out, _ = cli("stats", "--tenant", "acme")
    assert code == 0 and "destinations_of_tenant" in out and "acme" in out
    assert "other tenants" not in out  # one tenant asked for: nothing else to say
    # Without --tenant, with tenants besides the default one: say where the rest is
    # (an operator paged for acme's failures read the default tenant's counts only).
    code, out, _ = cli("stats")
    assert code == 0 and "other tenants have 1 paused" in out
    assert "`hookline destinations list` shows every tenant's" in out
    code, _, err = cli("stats", "--tenant", "nobody")
    assert code == 1 and "nobody" in err
    code, _, err = cli("stats", "--tenant", "bad id!")
    assert code == 2 and "--tenant" in err


def _table(out: str) -> list[dict[str, str]]:
    """A `print_table` output as rows of {HEADING: cell} (cells hold no spaces here)."""
    header, *lines = out.strip().splitlines()
    return [dict(zip(header.split(), line.split(), strict=False)) for line in lines]


def test_event_and_dead_letter_listings_name_each_ones_tenant(cli, store_url):
    """Three tenants each have a destination `billing` (the default tenant too), with one
    event each whose job died: `hookline dead`, `hookline events` and `hookline event`
    (listing every tenant's, or looked up by the global webhook-id) say whose each row is,
    in the text tables and in --json, so no `billing` row is another tenant's in disguise."""
    for tenant in ("acme", "globex"):
        ok_json(cli, "tenants", "put", tenant)
        ok_json(cli, "destinations", "add", "billing", URL, "--tenant", tenant)
    ok_json(cli, "destinations", "add", "billing", URL)

    async def dead_letter_each() -> dict[str, str]:
        async with opened_store(store_url) as store:
            for tenant in ("acme", "globex", "_default"):
                await store.add_event(new_event(f"inv-{tenant.lstrip('_')}", tenant=tenant))
            claims = await store.claim("w1", 10, 30.0, 5)
            await store.finish([(c, Dead(error="gone"), AttemptResult(
                started_at=await store.now_s(), duration_s=0.01, status_code=410))
                for c in claims])
            return {j.tenant: str(j.id) for j in await store.list_jobs()}
    job_of = asyncio.run(dead_letter_each())

    code, out, _ = cli("dead")
    assert code == 0
    assert {(row["ID"], row["TENANT"], row["DESTINATION"]) for row in _table(out)} == {
        (job, tenant, "billing") for tenant, job in job_of.items()}
    events = ok_json(cli, "events")["events"]
    assert {(e["source_event_id"], e["tenant"]) for e in events} == {
        ("inv-acme", "acme"), ("inv-globex", "globex"), ("inv-default", "_default")}
    code, out, _ = cli("events")
    assert code == 0
    assert {(row["SOURCE_EVENT_ID"], row["TENANT"]) for row in _table(out)} == {
        ("inv-acme", "acme"), ("inv-globex", "globex"), ("inv-default", "_default")}
    acme_event = next(e for e in events if e["tenant"] == "acme")
    assert ok_json(cli, "event", acme_event["message_id"])["tenant"] == "acme"
    code, out, _ = cli("event", acme_event["message_id"])
    assert code == 0 and any(line.split() == ["tenant", "acme"] for line in out.splitlines())


def test_event_by_internal_or_webhook_id_is_found_in_any_tenant(cli, store_url):
    """Internal ids and msg_ webhook-ids are global: `hookline event REF` finds another
    tenant's event by them without --tenant (as GET /v1/admin/events/{ref} does); a
    sender's id, which repeats across tenants, means the default tenant's, else the one
    other tenant's that has it."""
    ok_json(cli, "tenants", "put", "acme")

    async def publish() -> None:
        async with opened_store(store_url) as store:
            await store.add_event(new_event("inv-1", tenant="acme"))
    asyncio.run(publish())
    [acme_event] = ok_json(cli, "events", "--tenant", "acme")["events"]
    for ref in (str(acme_event["id"]), acme_event["message_id"]):
        assert ok_json(cli, "event", ref)["id"] == acme_event["id"], ref
    assert ok_json(cli, "event", "inv-1")["id"] == acme_event["id"]  # only acme has it
    assert ok_json(cli, "event", "inv-1", "--tenant", "acme")["id"] == acme_event["id"]
    code, _, err = cli("event", "inv-1", "--tenant", DEFAULT_TENANT)
    assert code == 1 and "in tenant _default's events" in err


def test_audit_lines_name_the_default_tenant_when_none_was_given(cli):
    """pause, resume, replay and remove without --tenant act on the default tenant's
    destination, and their audit lines say so (`_default`, never null)."""
    ok_json(cli, "destinations", "add", "billing", URL)
    for args, event in ((("pause", "billing", "--reason", "r"), "destination_paused"),
                        (("resume", "billing"), "destination_resumed"),
                        (("replay", "--all-dead", "--destination", "billing"), "jobs_replayed"),
                        (("destinations", "remove", "billing"), "destination_removed")):
        code, _, err = cli(*args)
        assert code == 0, (args, err)
        line = json.loads(err.splitlines()[-1])
        assert (line["event"], line["tenant"]) == (event, "_default"), args


async def _retries_of_two_billings(url: str) -> None:
    """acme's and globex's `billing` each with one job whose retry waits an hour, both
    paused."""
    async with opened_store(url) as store:
        await store.add_events([new_event("a1", tenant="acme"),
                                new_event("g1", tenant="globex")])
        claims = await store.claim("w1", 10, 30.0, 5)
        result = AttemptResult(started_at=time.time(), duration_s=0.01, status_code=500)
        await store.finish([(c, Retry(delay_s=3600, error="HTTP 500"), result)
                            for c in claims])
        for tenant in ("acme", "globex"):
            await store.set_paused("billing", True, "receiver down", tenant=tenant)


def test_resume_brings_the_tenants_waiting_retries_forward_and_says_how_many(cli, store_url):
    """`hookline resume billing --tenant acme` makes acme's waiting retry due now and says
    so (text and --json); globex's `billing`, paused too, keeps its retry's schedule."""
    for tenant in ("acme", "globex"):
        ok_json(cli, "tenants", "put", tenant)
        ok_json(cli, "destinations", "add", "billing", URL, "--tenant", tenant)
    asyncio.run(_retries_of_two_billings(store_url))
    code, out, err = cli("resume", "billing", "--tenant", "acme")
    assert (code, out) == (0, "resumed billing (tenant acme); brought forward 1 job(s) "
                              "waiting for a retry\n"), err
    assert json.loads(err.splitlines()[-1])["jobs_brought_forward"] == 1
    now = time.time()
    [acme_job] = ok_json(cli, "jobs", "--tenant", "acme")
    [globex_job] = ok_json(cli, "jobs", "--tenant", "globex")
    assert acme_job["run_at"] <= now < globex_job["run_at"] - 3000
    assert ok_json(cli, "resume", "billing", "--tenant", "globex") == {
        "resumed": "billing", "brought_forward": 1}


LABELLED = (("pause", "acme~billing", "--reason", "r"), ("resume", "acme~billing"),
            ("destinations", "show", "acme~billing"),
            ("destinations", "update", "acme~billing", "--max-in-flight", "3"),
            ("destinations", "rotate-secret", "acme~billing"),
            ("destinations", "secret", "acme~billing"),
            ("destinations", "expire-previous-secret", "acme~billing"),
            ("destinations", "filter-test", "acme~billing"),
            ("retry-now", "--destination", "acme~billing", "--dry-run"),
            ("resend", "--destination", "acme~billing", "--dry-run"),
            ("replay", "--all-dead", "--destination", "acme~billing", "--dry-run"),
            ("dead", "--destination", "acme~billing"), ("jobs", "--destination", "acme~billing"),
            ("events", "--destination", "acme~billing"))
"""Commands naming acme's `billing` by the label metrics and alerts give it."""


def test_a_destination_label_names_the_tenants_destination(cli):
    """`hookline resume acme~billing` (the label of metrics and alerts) means `resume billing
    --tenant acme`, in every command naming a destination; `--tenant acme` beside it is the
    same, another tenant is exit 2 naming both; a malformed label is exit 2."""
    ok_json(cli, "tenants", "put", "acme")
    ok_json(cli, "destinations", "add", "billing", URL, "--tenant", "acme")
    ok_json(cli, "destinations", "add", "billing", URL)  # the default tenant's, left alone
    for command in LABELLED:
        code, out, err = cli(*command)
        assert code == 0, (command, err)
    code, out, err = cli("pause", "acme~billing", "--reason", "fixing")
    assert (code, out) == (0, "paused billing (tenant acme) (fixing)\n"), err
    assert json.loads(err.splitlines()[-1])["tenant"] == "acme"
    assert ok_json(cli, "destinations", "show", "billing", "--tenant", "acme")["paused"]
    assert not ok_json(cli, "destinations", "show", "billing")["paused"]
    assert ok_json(cli, "resume", "acme~billing", "--tenant", "acme")["resumed"] == "billing"
    assert ok_json(cli, "destinations", "show", "acme~billing")["max_in_flight"] == 3

    code, out, err = cli("resume", "acme~billing", "--tenant", "globex")
    assert (code, out) == (2, "")
    assert err.strip() == ("hookline: tenant: 'acme~billing' is tenant acme's destination "
                           "'billing', but --tenant says globex: give one of them")
    for bad in ("acme~", "~billing", "acme~bill~ing", "no such~billing"):
        code, _, err = cli("resume", bad)
        assert code == 2 and "is neither a destination name nor a destination label" in err, (
            bad, err)
    code, _, err = cli("resume", "_secret~billing")
    assert code == 2 and "reserved" in err
    code, _, err = cli("resume", "globex~billing")
    assert code == 1 and "no tenant 'globex'" in err


def test_a_removed_destinations_name_is_still_no_label(cli, store_url):
    """`NAME~removed-ID` (a removed destination's name) still names the default tenant's (or
    --tenant's) removed destination; `TENANT~NAME~removed-ID` another tenant's."""
    ok_json(cli, "tenants", "put", "acme")
    for tenant in ("_default", "acme"):
        ok_json(cli, "destinations", "add", "gone", URL, "--tenant", tenant)

    async def publish() -> None:
        async with opened_store(store_url) as store:
            await store.add_events([new_event("e1"), new_event("a1", tenant="acme")])
    asyncio.run(publish())
    for tenant in ("_default", "acme"):
        assert cli("destinations", "remove", "gone", "--tenant", tenant)[0] == 0
    [default_dead] = ok_json(cli, "dead", "--tenant", "_default")
    [acme_dead] = ok_json(cli, "dead", "--tenant", "acme")
    assert ok_json(cli, "dead", "--destination", default_dead["destination"]) == [default_dead]
    assert ok_json(cli, "dead", "--destination", acme_dead["destination"],
                   "--tenant", "acme") == [acme_dead]
    assert ok_json(cli, "dead", "--destination",
                   f"acme~{acme_dead['destination']}") == [acme_dead]


def test_logs_take_a_destination_label(cli, tmp_path):
    """`hookline logs --destination acme~billing` shows the lines about acme's `billing`
    (logs carry `destination` and `tenant`), not the default tenant's `billing`."""
    log = tmp_path / "hookline.log"
    lines = [{"event": "attempt_failed", "destination": "billing", "tenant": "acme",
              "level": "info", "timestamp": "2026-01-01T00:00:00Z", "job_id": 1},
             {"event": "attempt_failed", "destination": "billing", "tenant": None,
              "level": "info", "timestamp": "2026-01-01T00:00:01Z", "job_id": 2}]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, out, err = cli("logs", str(log), "--destination", "acme~billing", "--json")
    assert code == 0, err
    assert [json.loads(line)["job_id"] for line in out.splitlines()] == [1]
    code, _, err = cli("logs", str(log), "--destination", "acme~billing", "--tenant", "beta")
    assert code == 2 and "--tenant says beta" in err
