"""add_events' batch path on both backends: results, ids, jobs and bodies checked against
what is really stored (SQLite reads inserted rows back by rowid, in multi-row statements)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hookline.shared.models import Accepted, Duplicate, NewEvent
from hookline.shared.store import Store
from hookline.shared.store.sqlite import SqliteStore
from hookline.shared.store.wakeup import WakeListener, wake_dir_for
from tests.conftest import query_db

SECRET = "whsec_" + "A" * 32
TYPES = ("order.created", "order.paid", "user.created", "ping")
# name -> patterns; "gone" is removed and "held" paused before any event arrives.
DESTINATIONS = {"all": ["*"], "orders": ["order.*"], "created": ["order.created"],
                "users": ["user.*", "ping"], "gone": ["*"], "held": ["order.paid"]}


def _body(n: int) -> bytes:
    """Not UTF-8, with NUL and high bytes: must be stored byte for byte."""
    return b"\xff\x00\xfe" + n.to_bytes(4, "big") + b"\x80\xc3\x28"


def _patterns_match(patterns: list[str], event_type: str) -> bool:
    return any(p == "*" or p == event_type or (p.endswith(".*") and event_type.startswith(p[:-1]))
               for p in patterns)


async def _check_batch(store: Store, url: str, events: list[NewEvent],
                       results: list[Accepted | Duplicate], before: dict[tuple[str, str], int],
                       destination_ids: dict[str, int]) -> None:
    """Each result against the database: new keys Accepted once (first occurrence), every
    other occurrence Duplicate with the stored id; jobs exactly for the live subscribers."""
    stored = {(r["source"], r["source_event_id"]): r for r in await query_db(
        url, "SELECT id, message_id, source, source_event_id, type, body FROM events")}
    jobs: dict[int, set[tuple[int, int]]] = {}
    for r in await query_db(url, "SELECT id, event_id, destination_id FROM jobs"):
        jobs.setdefault(r["event_id"], set()).add((r["id"], r["destination_id"]))
    seen: set[tuple[str, str]] = set()
    live = {name: destination_ids[name] for name in DESTINATIONS if name != "gone"}
    for event, result in zip(events, results, strict=True):
        key = (event.source, event.source_event_id)
        row = stored[key]
        assert result.event_id == row["id"] and result.message_id == row["message_id"]
        if key in before or key in seen:
            assert isinstance(result, Duplicate), (key, result)
        else:
            assert isinstance(result, Accepted), (key, result)
            assert bytes(row["body"]) == event.body
            wanted = {d for name, d in live.items() if _patterns_match(DESTINATIONS[name],
                                                                        event.type)}
            assert {d for _, d in jobs.get(row["id"], set())} == wanted
            assert set(result.job_ids) == {j for j, _ in jobs.get(row["id"], set())}
            assert list(result.job_ids) == sorted(result.job_ids)
        seen.add(key)


async def test_batches_of_every_statement_size_store_what_they_answer(store, store_url):
    """Sizes around the 64-row statement bound, with repeats inside a batch, repeats of
    stored events, and types that only some (or no live) destinations subscribe to."""
    ids = {}
    for name, patterns in DESTINATIONS.items():
        ids[name] = (await store.add_destination(
            name=name, url=f"http://127.0.0.1:9/{name}", secret=SECRET, event_types=patterns,
            max_in_flight=4)).id
    await store.remove_destination("gone")
    await store.set_paused("held", True)
    before: dict[tuple[str, str], int] = {}
    serial = 0
    for size in (1, 63, 64, 65, 129, 512):
        events = []
        for n in range(size):
            if n % 7 == 3 and before:  # a stored event again
                source, sid = sorted(before)[n % len(before)]
            elif n % 11 == 5 and events:  # an earlier event of this batch again
                source, sid = events[n // 2].source, events[n // 2].source_event_id
            else:
                serial += 1
                source, sid = ("api", "stripe")[serial % 2], f"e{serial}"
            events.append(NewEvent(source=source, source_event_id=sid,
                                   type=TYPES[serial % len(TYPES)] if n % 13 else "nobody.x",
                                   body=_body(serial)))
        results = await store.add_events(events)
        await _check_batch(store, store_url, events, results, before, ids)
        before.update({(e.source, e.source_event_id): r.event_id
                       for e, r in zip(events, results, strict=True)})


async def test_events_without_any_destination_are_accepted_without_jobs(store):
    """No destination at all (PostgreSQL's json_agg of nothing is NULL), then only a deleted
    one."""
    first = await store.add_events([NewEvent(source="api", source_event_id=f"n{n}", type="t",
                                             body=b"\x00") for n in range(70)])
    assert all(isinstance(r, Accepted) and r.job_ids == () for r in first)
    await store.add_destination(name="d", url="http://127.0.0.1:9/d", secret=SECRET,
                                event_types=["*"], max_in_flight=1)
    await store.remove_destination("d")
    again = await store.add_events([NewEvent(source="api", source_event_id="n0", type="t",
                                             body=b""),
                                    NewEvent(source="api", source_event_id="m", type="t",
                                             body=b"")])
    assert isinstance(again[0], Duplicate) and again[0].event_id == first[0].event_id
    assert isinstance(again[1], Accepted) and again[1].job_ids == ()


@pytest.mark.sqlite_only
async def test_a_failing_batch_rolls_back_releases_the_lock_and_wakes_nobody(tmp_path: Path):
    """A row the database refuses in the second statement of a batch: nothing of the batch
    is stored, the write lock is free for the next batch, and no worker is woken."""
    path = str(tmp_path / "h.db")
    async with SqliteStore(path) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/d", secret=SECRET,
                                    event_types=["*"], max_in_flight=1)
        listener = WakeListener(wake_dir_for(path))
        try:
            bad: Any = None  # NOT NULL: the 70th row fails after 64 rows went in
            events = [NewEvent(source="api", source_event_id=f"f{n}", type="t",
                               body=b"x" if n != 69 else bad) for n in range(80)]
            with pytest.raises(sqlite3.IntegrityError):
                await store.add_events(events)
            assert not await listener.wait(0.3)
            assert await query_db(path, "SELECT count(*) AS n FROM events") == [{"n": 0}]
            # Another store (as another process: its own connection and lock handle) can
            # write at once: both SQLite's lock and hookline's file lock were released.
            async with SqliteStore(path, busy_timeout_s=1.0) as other:
                assert isinstance(await other.add_event(events[0]), Accepted)
            ok = await store.add_events(events[1:69])
            assert all(isinstance(r, Accepted) and len(r.job_ids) == 1 for r in ok)
            assert await listener.wait(5.0)
        finally:
            listener.close()


@pytest.mark.sqlite_only
async def test_another_connection_writing_events_meanwhile_never_lands_in_a_batch(
        tmp_path: Path):
    """Another connection (no hookline lock, as a foreign process) inserts events and jobs
    in a tight loop while batches go in: each batch's answer still names only its own rows,
    whether its ids were counted back from the statements (nothing skipped) or read back
    (odd batches repeat a stored event in their second statement), because BEGIN IMMEDIATE
    keeps the other writer out between max(rowid) and the read-back."""
    path = str(tmp_path / "h.db")
    async with SqliteStore(path) as store:
        await store.add_destination(name="d", url="http://127.0.0.1:9/d", secret=SECRET,
                                    event_types=["*"], max_in_flight=1)
        stop = threading.Event()

        def intrude() -> None:
            db = sqlite3.connect(path, timeout=10, isolation_level=None)
            n = 0
            while not stop.is_set():
                n += 1
                cursor = db.execute("INSERT INTO events (message_id, source, source_event_id,"
                                    " type, body, received_at) VALUES (?, 'other', ?, 't',"
                                    " x'00', 0)", (f"other-{n}", f"o{n}"))
                db.execute("INSERT INTO jobs (event_id, destination_id, run_at, created_at,"
                           " updated_at) VALUES (?, 1, 0, 0, 0)", (cursor.lastrowid,))
                time.sleep(0.001)  # SQLite's busy wait is not fair: leave the store a turn
            db.close()

        thread = threading.Thread(target=intrude)
        thread.start()
        try:
            for batch in range(8):
                events = [NewEvent(source="api", source_event_id=f"b{batch}-{n}", type="t",
                                   body=b"x") for n in range(130)]
                if batch % 2:
                    events[100] = NewEvent(source="api", source_event_id="b0-7", type="t",
                                           body=b"x")
                results = await store.add_events(events)
                assert [isinstance(r, Accepted) for r in results] == [
                    e.source_event_id != "b0-7" or batch == 0 for e in events]
                stored = {r["source_event_id"]: r["id"] for r in await query_db(
                    path, f"SELECT id, source_event_id FROM events "
                          f"WHERE source_event_id LIKE 'b{batch}-%' "
                          f"OR source_event_id = 'b0-7'")}
                assert [r.event_id for r in results] == [
                    stored[e.source_event_id] for e in events]
                jobs = {r["event_id"]: (r["id"],) for r in await query_db(
                    path, "SELECT id, event_id FROM jobs WHERE event_id IN "
                          f"({', '.join(str(r.event_id) for r in results)})")}
                assert {r.event_id: r.job_ids for r in results
                        if isinstance(r, Accepted)} == {
                    r.event_id: jobs[r.event_id] for r in results if isinstance(r, Accepted)}
                await asyncio.sleep(0)
        finally:
            stop.set()
            thread.join()
        others = await query_db(path, "SELECT count(*) AS n FROM events WHERE source = 'other'")
        assert others[0]["n"] > 0  # the other writer did run beside the batches


def test_an_upsert_that_updates_runs_row_by_row(tmp_path: Path):
    """RETURNING names an updated row too, but an updated row keeps its rowid (not above
    the table's largest before the insert): the read-back by rowid would drop it, so an
    upsert that updates must not take the multi-row path."""
    from hookline.shared.store.sqlite_rows import insert_rows, row_insert

    upsert = """INSERT INTO items (name, size) VALUES (:name, :size)
ON CONFLICT (name) DO UPDATE SET size = excluded.size
RETURNING id, name"""
    db = sqlite3.connect(tmp_path / "items.db", isolation_level=None)
    try:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                   "name TEXT NOT NULL UNIQUE, size INTEGER NOT NULL)")
        db.execute("INSERT INTO items (name, size) VALUES ('a', 1)")
        expected = [tuple(r) for r in db.execute(upsert, {"name": "a", "size": 2})]
        assert expected == [(1, "a")]  # what RETURNING answers for the row it updated
        insert = row_insert(upsert)
        if insert is not None:  # taken as a multi-row insert: it must answer the same
            db.execute("BEGIN IMMEDIATE")
            back = insert_rows(db, insert, ("name", "size"), [("a", 3)], {})
            db.execute("COMMIT")
            assert [(r["id"], r["name"]) for r in back] == expected
    finally:
        db.close()


def test_a_read_back_outside_a_transaction_is_refused(tmp_path: Path):
    """An insert that may skip rows reads back by rowid above the table's largest: outside a
    transaction each statement commits alone and another writer's rows could land between,
    so it is refused rather than answered wrong. One that cannot skip takes its rowids from
    the statement itself, inside a transaction or not."""
    from hookline.shared.store.sqlite_rows import insert_rows, row_insert

    may_skip = row_insert("INSERT INTO items (name) VALUES (:name) "
                          "ON CONFLICT (name) DO NOTHING RETURNING id, name")
    never_skips = row_insert("INSERT INTO items (name) VALUES (:name) RETURNING id, name")
    assert may_skip is not None and never_skips is not None
    db = sqlite3.connect(tmp_path / "items.db", isolation_level=None)
    try:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                   "name TEXT UNIQUE)")
        with pytest.raises(RuntimeError, match="write transaction"):
            insert_rows(db, may_skip, ("name",), [("a",)], {})
        assert db.execute("SELECT count(*) FROM items").fetchone() == (0,)
        back = insert_rows(db, never_skips, ("name",), [("b",), ("c",)], {})
        assert [(r["id"], r["name"]) for r in back] == db.execute(
            "SELECT id, name FROM items ORDER BY id").fetchall() == [(1, "b"), (2, "c")]
    finally:
        db.close()


@pytest.mark.sqlite_only
async def test_a_batch_whose_jobs_all_wait_on_paused_destinations_wakes_nobody(tmp_path: Path):
    """Jobs nobody may claim (every destination of the batch paused) wake no worker: a woken
    worker would only run an empty claim. One live destination among them wakes them, as a
    resume does once it has committed."""
    path = str(tmp_path / "h.db")
    async with SqliteStore(path) as store:
        for name in ("p1", "p2", "live"):
            await store.add_destination(name=name, url=f"http://127.0.0.1:9/{name}",
                                        secret=SECRET, event_types=[name], max_in_flight=1)
        await store.set_paused("p1", True, reason="operator")
        await store.set_paused("p2", True, reason="operator")
        await store.set_paused("live", True, reason="operator")
        listener = WakeListener(wake_dir_for(path))
        try:
            paused = await store.add_events([
                NewEvent(source="api", source_event_id=f"p{n}", type=f"p{n % 2 + 1}",
                         body=b"{}") for n in range(6)])
            assert all(isinstance(r, Accepted) and len(r.job_ids) == 1 for r in paused)
            assert not await listener.wait(0.3)
            await store.set_paused("live", False)
            assert await listener.wait(5.0)  # the resume's own wake-up
            await store.add_events([NewEvent(source="api", source_event_id="x", type="p1",
                                             body=b"{}"),
                                    NewEvent(source="api", source_event_id="y", type="live",
                                             body=b"{}")])
            assert await listener.wait(5.0)
        finally:
            listener.close()
