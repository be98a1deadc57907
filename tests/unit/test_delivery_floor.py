"""rehearsal/delivery_floor.py, the delivery side of the least durable service the everyday
scenario measures: its claim by cursor and its marks on a real SQLite file made by the
ingest floor, and the whole loop against a real receiver on 127.0.0.1. Beside the ingest
floor, under load, it runs in tests/acceptance/test_durable_floor.py."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from standardwebhooks.webhooks import Webhook

from hookline.rehearsal.delivery_floor import Counts, FloorDeliverer, serve
from hookline.rehearsal.harness import free_port
from hookline.rehearsal.ingest_floor import Event, FloorStore
from hookline.shared.signing import generate_secret

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _statuses(conn: sqlite3.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall())


def test_a_claim_reads_the_jobs_after_its_cursor_and_a_mark_writes_them_delivered(tmp_path):
    """Two events of 3 jobs: a claim of 4 reads the first four jobs in id order with their
    events, without writing; the next marks those delivered and reads the other two; a
    restart starts after the last job marked delivered, so the unmarked are read again."""
    path = str(tmp_path / "floor.db")
    FloorStore(path, jobs_per_event=3).write([Event("e1", "invoice.paid", b'{"n":1}'),
                                              Event("e2", "invoice.sent", b'{"n":2}')])
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        deliverer = FloorDeliverer(conn, "http://127.0.0.1:9", ["whsec_a", "whsec_b", "whsec_c"])
        first = deliverer.mark_and_claim([], 4)
        assert [(job.job_id, job.destination, job.event_type, job.body) for job in first] == [
            (1, 0, "invoice.paid", b'{"n":1}'), (2, 1, "invoice.paid", b'{"n":1}'),
            (3, 2, "invoice.paid", b'{"n":1}'), (4, 0, "invoice.sent", b'{"n":2}')]
        assert _statuses(conn) == {"pending": 6}
        assert (deliverer.counts.writes, deliverer.counts.reads) == (0, 1)
        second = deliverer.mark_and_claim([1, 2, 3], 64)
        assert [job.job_id for job in second] == [5, 6]
        assert _statuses(conn) == {"delivered": 3, "pending": 3}
        assert deliverer.mark_and_claim([], 64) == []
        assert deliverer.mark_and_claim([4], 0) == []  # a mark alone: no read
        assert (deliverer.counts.writes, deliverer.counts.reads) == (2, 3)
        again = FloorDeliverer(conn, "http://127.0.0.1:9", ["whsec_a", "whsec_b", "whsec_c"])
        assert [job.job_id for job in again.mark_and_claim([], 64)] == [5, 6]


async def _receiver(endpoint: Handler) -> tuple[web.AppRunner, int]:
    """`endpoint` serving POST /dN on 127.0.0.1; its runner (to clean up) and port."""
    app = web.Application()
    app.router.add_post("/d{number}", endpoint)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port


async def _deliver_all(tmp_path: Path, events: int, concurrency: int, answer_after_s: float = 0.0
                       ) -> tuple[Counts, list[str], dict[str, int]]:
    """Store `events` events of 3 jobs, then serve (a deliverer claims at its start, as
    after a restart; the wake-up datagrams are the acceptance test's) until every job is
    marked delivered (at most 20 s); the receiver answers `answer_after_s` seconds after
    each request. Returns the deliverer's counts, the webhook-ids the receiver verified
    (standardwebhooks), and the jobs by status."""
    secrets = [generate_secret() for _ in range(3)]
    received: list[str] = []

    async def endpoint(request: web.Request) -> web.Response:
        body = await request.read()
        await asyncio.sleep(answer_after_s)
        Webhook(secrets[int(request.match_info["number"]) - 1]).verify(body, request.headers)
        received.append(request.headers["webhook-id"])
        return web.Response(status=204)

    runner, port = await _receiver(endpoint)
    path, wake = str(tmp_path / "floor.db"), str(tmp_path / "wake")
    FloorStore(path, 3).write([Event(f"e{n}", "t", b'{"n": %d}' % n) for n in range(events)])
    stop = asyncio.Event()
    serving = asyncio.create_task(serve(path, wake, f"http://127.0.0.1:{port}", secrets,
                                        concurrency, 0.01, stop))
    try:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            async with asyncio.timeout(20):
                while (statuses := _statuses(conn)) != {"delivered": 3 * events} \
                        and not serving.done():
                    await asyncio.sleep(0.02)
    finally:
        stop.set()
        counts = await serving
        await runner.cleanup()
    return counts, received, statuses


def test_the_deliverer_sends_every_job_once_with_two_slots_and_marks_each(tmp_path):
    """Ten events, 30 jobs, two slots: no wake-up is needed (a full claim claims again),
    every job arrives signed exactly once, every row is marked, and marks share writes
    (results wait for the next claim, or FILLED_ENOUGH of them are written at once)."""
    counts, received, statuses = asyncio.run(_deliver_all(tmp_path, events=10, concurrency=2))
    assert counts.error is None and counts.failed == 0
    assert statuses == {"delivered": 30} and counts.delivered == 30
    assert sorted(received) == sorted(f"msg_floor_{n}" for n in range(1, 31))
    assert 1 <= counts.writes < 30


def test_a_slow_receiver_does_not_stall_the_claims(tmp_path):
    """Answers 100 ms late, two slots, no wake-up after the start: each full claim claims
    again when its slots free (more may be due), the results of each pair are written with
    the next claim, and every job is delivered once and marked."""
    counts, received, statuses = asyncio.run(
        _deliver_all(tmp_path, events=4, concurrency=2, answer_after_s=0.1))
    assert counts.error is None and statuses == {"delivered": 12}
    assert sorted(received) == sorted(f"msg_floor_{n}" for n in range(1, 13))


def test_a_failed_delivery_stops_the_deliverer_and_says_why(tmp_path):
    """A receiver that answers 401 to everything: the first failure ends serve with its
    error, the job left unmarked."""
    secrets = [generate_secret() for _ in range(3)]

    async def refuse(request: web.Request) -> web.Response:
        return web.Response(status=401)

    async def scenario() -> Counts:
        runner, port = await _receiver(refuse)
        path, wake = str(tmp_path / "floor.db"), str(tmp_path / "wake")
        FloorStore(path, 3).write([Event("e1", "t", b"{}")])
        serving = asyncio.create_task(serve(path, wake, f"http://127.0.0.1:{port}", secrets,
                                            4, 0.01, asyncio.Event()))
        counts = await asyncio.wait_for(serving, 20)  # ends by itself: no stop set
        await runner.cleanup()
        return counts

    counts = asyncio.run(scenario())
    assert counts.failed >= 1 and counts.delivered == 0
    assert counts.error is not None and "HTTP 401" in counts.error
