"""The bench's load generator (rehearsal/loadgen.py) against a real aiohttp server on 127.0.0.1:
every event posted once with its headers, statuses counted, a closed connection reopened, and
a refused connection counted as an error instead of ending the run."""

from __future__ import annotations

import itertools
import json
import socket
import statistics
import time

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from hookline.rehearsal import loadgen


async def test_every_event_is_posted_once_and_each_answer_is_counted(monkeypatch):
    """Each of 40 events arrives once, whole, with the token; every fifth is answered 503 with
    `Connection: close` (the generator reopens), a few 204 without a body (read as none),
    and only 2xx answers get an accept time."""
    monkeypatch.setenv("HOOKLINE_INGEST_TOKEN", "tok-1")
    seen: list[dict[str, object]] = []

    async def events(request: web.Request) -> web.Response:
        assert request.headers["authorization"] == "Bearer tok-1"
        assert request.headers["content-type"] == "application/json"
        body = await request.json()
        seen.append(body)
        index = int(str(body["id"]).rsplit("-", 1)[1])
        if index % 5 == 0:
            return web.json_response({"error": "busy"}, status=503,
                                     headers={"Connection": "close"})
        if index % 7 == 3:
            return web.Response(status=204)  # no body and no Content-Length
        return web.json_response({"accepted": True}, status=202)

    app = web.Application()
    app.router.add_post("/v1/events", events)
    async with TestServer(app, host="127.0.0.1") as server:
        accepted_at: list[float | None] = []
        figures = await loadgen.run(str(server.make_url("/v1/events")), 40, concurrency=4,
                                    rate_per_s=None, body_bytes=600, run_id="r1",
                                    accepted_at=accepted_at, tenant="acme")
    assert sorted(str(body["id"]) for body in seen) == sorted(f"bench-r1-{i}" for i in range(40))
    assert all(body["tenant"] == "acme" for body in seen)
    assert figures["statuses"] == {"202": 27, "204": 5, "503": 8}
    assert [at is None for at in accepted_at] == [i % 5 == 0 for i in range(40)]
    assert isinstance(figures["generator_cpu_s"], float)
    assert json.loads(json.dumps(figures)) == figures  # printed as one JSON line


async def test_a_refused_connection_is_counted_and_the_run_goes_on():
    """Nothing listens on the port: every post fails as a connection error, none is lost
    from the counts, and run returns."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    figures = await loadgen.run(f"http://127.0.0.1:{port}/v1/events", 6, concurrency=2,
                                rate_per_s=None, body_bytes=200)
    assert figures["statuses"] == {"ConnectionRefusedError": 6}


async def test_a_url_it_cannot_post_to_as_given_is_refused():
    """https, a query or credentials would be dropped or sent in the clear: refused."""
    for url in ("https://127.0.0.1:9/v1/events", "http://127.0.0.1:9/v1/events?x=1",
                "http://u:p@127.0.0.1:9/v1/events"):
        with pytest.raises(ValueError, match="plain http"):
            await loadgen.run(url, 1, concurrency=1, rate_per_s=None, body_bytes=10)


def test_arrival_schedules_are_even_or_poisson_at_the_rate():
    """even: exactly 1/rate apart; poisson: the same schedule every run (a fixed seed),
    rising, with gaps of mean 1/rate and about as spread as their mean (an exponential's
    coefficient of variation is 1; even gaps have 0)."""
    assert loadgen.arrival_offsets(4, 200.0) == [0.0, 0.005, 0.01, 0.015]
    poisson = loadgen.arrival_offsets(4000, 200.0, "poisson")
    assert poisson == loadgen.arrival_offsets(4000, 200.0, "poisson") and poisson[0] == 0.0
    gaps = [later - earlier for earlier, later in itertools.pairwise(poisson)]
    assert min(gaps) >= 0.0 and len(poisson) == 4000
    mean = sum(gaps) / len(gaps)
    spread = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5
    assert 0.9 / 200 < mean < 1.1 / 200 and 0.85 < spread / mean < 1.15
    assert loadgen.arrival_offsets(0, 200.0, "poisson") == loadgen.arrival_offsets(-1, 5.0) == []
    for bad in (("x", 200.0), ("even", 0.0)):
        with pytest.raises(ValueError):
            loadgen.arrival_offsets(3, bad[1], bad[0])


async def test_poisson_arrivals_reach_the_server_on_their_schedule():
    """200 events at 100/s with poisson arrivals: all arrive, each close to its scheduled
    time. Misses are measured from the lag all arrivals share (their median lag: the
    client's start-up, which a loaded machine makes late, and anchoring to the first
    arrival counted it in every miss). The schedule strays from even pacing by a median of
    about 30 ms measured the same way, so evenly paced posts would miss it by as much (the
    limit, 20 ms, leaves a loaded machine room)."""
    arrived: list[float] = []

    async def events(request: web.Request) -> web.Response:
        await request.read()
        arrived.append(time.monotonic())
        return web.json_response({"accepted": True}, status=202)

    app = web.Application()
    app.router.add_post("/v1/events", events)
    async with TestServer(app, host="127.0.0.1") as server:
        figures = await loadgen.run(str(server.make_url("/v1/events")), 200, concurrency=8,
                                    rate_per_s=100.0, body_bytes=200, arrivals="poisson")
    assert figures["statuses"] == {"202": 200}
    schedule = loadgen.arrival_offsets(200, 100.0, "poisson")
    even = loadgen.arrival_offsets(200, 100.0)
    assert _median_miss(even, schedule) > 0.025
    start = arrived[0]
    miss = _median_miss([at - start for at in sorted(arrived)], schedule)
    assert miss < 0.02, miss


def _median_miss(offsets: list[float], schedule: list[float]) -> float:
    """The median of how far each offset (s) lies from its due time, once the lag they all
    share (the median lag) is taken away."""
    lags = [offset - due for offset, due in zip(offsets, schedule, strict=True)]
    shared = statistics.median(lags)
    return statistics.median(abs(lag - shared) for lag in lags)


@pytest.mark.parametrize(("extra", "message"), [
    (["--arrivals", "poisson"], "--arrivals poisson needs --rate"),
    (["--rate", "0"], "--rate must be above 0"), (["--rate", "-5"], "--rate must be above 0")])
def test_cli_refuses_a_schedule_it_cannot_keep(capsys, extra, message):
    """Flat out there is no schedule to make random, and a rate must be above 0: exit 2,
    naming the option, before anything is posted."""
    with pytest.raises(SystemExit) as exited:
        loadgen.main(["--url", "http://127.0.0.1:9/v1/events", "--events", "1", *extra])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
