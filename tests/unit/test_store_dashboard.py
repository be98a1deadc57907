"""Dashboard views of the store on both backends: per-destination summaries with
latency percentiles, per-bucket throughput, and the size-limited event body of a job."""

from __future__ import annotations

import pytest

from hookline.shared.errors import ConfigError, NotFound
from hookline.shared.models import AttemptResult, Dead, Done, Retry
from hookline.shared.tenant_models import TenantFields
from tests.conftest import new_event

LEASE_S = 30.0


async def test_destination_summaries_count_jobs_and_show_pause_reasons(
        store, clock, destination_factory):
    """Each live destination reports in-flight (unexpired leases only), pending, dead, the
    oldest due pending job, its failure streak and its pause reason; removed ones are gone."""
    await destination_factory("a", max_in_flight=2)
    await destination_factory("b")
    await destination_factory("gone")
    await store.remove_destination("gone")
    await store.add_events([new_event(f"e{i}") for i in range(4)])  # 4 jobs each for a, b
    t0 = clock()
    await store.set_paused("b", True, "maintenance")
    claims = await store.claim("w1", 10, LEASE_S, 5)
    assert [c.destination_name for c in claims] == ["a", "a"]  # max_in_flight of a
    await store.finish([(claims[0], Dead(error="HTTP 400"),
                         AttemptResult(started_at=clock(), duration_s=0.2, status_code=400))])
    clock.advance(5)

    by_name = {s.name: s for s in await store.destination_summaries()}
    assert sorted(by_name) == ["a", "b"]
    a, b = by_name["a"], by_name["b"]
    assert (a.in_flight, a.pending, a.dead, a.failure_streak) == (1, 2, 1, 1)
    assert (a.paused, a.paused_reason, a.max_in_flight) == (False, None, 2)
    assert a.oldest_pending_at == pytest.approx(t0)
    assert (a.latency_samples, a.p50_s, a.p99_s) == (1, pytest.approx(0.2), pytest.approx(0.2))
    assert a.delivered_samples == 0  # the one sample was a 400
    assert (b.paused, b.paused_reason) == (True, "maintenance")
    assert (b.in_flight, b.pending, b.dead, b.latency_samples, b.p50_s) == (0, 4, 0, 0, None)

    clock.advance(LEASE_S)  # the running claim's lease expired: no longer in flight
    assert {s.name: s.in_flight for s in await store.destination_summaries()}["a"] == 0


async def test_latency_percentiles_are_nearest_rank_over_the_window(
        store, clock, destination_factory):
    """p50/p99 are nearest-rank over completed attempts started within the window; attempts
    older than the window, and claims without a result, are not samples."""
    await destination_factory("a", max_in_flight=100)
    await store.add_events([new_event(f"e{i}") for i in range(11)])
    claims = await store.claim("w1", 11, LEASE_S, 5)
    # ten results of 10, 20, ... 100 ms; the eleventh claim stays in flight
    await store.finish([(c, Done(), AttemptResult(started_at=clock(), duration_s=(i + 1) / 100,
                                                  status_code=200))
                        for i, c in enumerate(claims[:10])])
    [a] = await store.destination_summaries()
    assert (a.latency_samples, a.delivered_samples) == (10, 10)
    assert a.p50_s == pytest.approx(0.05) and a.p99_s == pytest.approx(0.10)
    [a] = await store.destination_summaries(latency_scan_limit=3)  # only the newest rows
    assert a.latency_samples == 2  # the third newest attempt row is the one still in flight

    clock.advance(901)
    [a] = await store.destination_summaries()
    assert (a.latency_samples, a.p50_s, a.p99_s) == (0, None, None)
    [a] = await store.destination_summaries(latency_window_s=3600)
    assert a.latency_samples == 10


async def test_throughput_counts_events_and_finished_jobs_per_bucket(
        store, clock, destination_factory):
    """Events by received_at and done/dead jobs by finished_at land in aligned buckets; every
    bucket of the window is there, oldest first, empty ones as zeros."""
    await destination_factory("a", max_in_flight=100)
    assert clock() % 60 == 0  # the fake clock starts on a minute boundary
    start = clock()
    await store.add_events([new_event("e1"), new_event("e2")])
    clock.advance(61)
    await store.add_events([new_event("e3")])
    claims = await store.claim("w1", 3, LEASE_S, 5)
    ok = AttemptResult(started_at=clock(), duration_s=0.01, status_code=200)
    await store.finish([(claims[0], Done(), ok), (claims[1], Done(), ok),
                        (claims[2], Dead(error="HTTP 400"), ok)])
    clock.advance(65)  # now in the third minute

    buckets = await store.throughput(window_s=300, bucket_s=60)
    assert [b.start_s for b in buckets] == [start + 60 * k for k in range(-3, 3)]
    assert [(b.events, b.delivered, b.dead) for b in buckets[-3:]] == [
        (2, 0, 0), (1, 2, 1), (0, 0, 0)]
    assert all((b.events, b.delivered, b.dead) == (0, 0, 0) for b in buckets[:-3])

    ten_s = await store.throughput(window_s=0, bucket_s=10)
    assert len(ten_s) == 1 and ten_s[0].start_s == start + 120
    with pytest.raises(ConfigError):
        await store.throughput(window_s=60, bucket_s=0)
    with pytest.raises(ConfigError):
        await store.throughput(window_s=-1)


async def test_throughput_counts_failed_attempts_by_start(store, clock, destination_factory):
    """Attempts answered other than 2xx, or failing in transport, count as failed in the
    bucket of their start; 2xx, lost-worker and handed-back attempts do not. With a scan
    limit, buckets older than the newest scanned attempt rows say None, not a short count."""
    await destination_factory("a", max_in_flight=100)
    assert clock() % 60 == 0
    start = clock()
    await store.add_events([new_event(f"e{i}") for i in range(5)])
    claims = await store.claim("w1", 5, LEASE_S, 5)
    at = clock()
    await store.finish([
        (claims[0], Retry(delay_s=3600, error="HTTP 503"),
         AttemptResult(started_at=at, duration_s=0.1, status_code=503)),
        (claims[1], Retry(delay_s=3600, error="ClientConnectorError"),
         AttemptResult(started_at=at, duration_s=0.1, error="ClientConnectorError")),
        (claims[2], Done(), AttemptResult(started_at=at, duration_s=0.1, status_code=200))])
    await store.hand_back([claims[3]])
    clock.advance(60)  # the next bucket's first instant
    await store.finish([(claims[4], Dead(error="HTTP 400"), AttemptResult(
        started_at=clock(), duration_s=0.1, status_code=400))])

    buckets = await store.throughput(window_s=120, bucket_s=60)
    assert [b.start_s for b in buckets] == [start - 60, start, start + 60]
    assert [b.failed for b in buckets] == [0, 2, 1]
    [a] = await store.destination_summaries()
    assert (a.latency_samples, a.delivered_samples) == (4, 1)

    newest_only = await store.throughput(window_s=120, bucket_s=60, failed_scan_limit=1)
    assert [b.failed for b in newest_only] == [None, None, 1]


async def test_event_body_is_size_limited(store, destination_factory):
    """event_body returns at most max_bytes of the body (bytes, not characters), the full size,
    and raises NotFound for an unknown job."""
    await destination_factory("a")
    body = '{"text": "héllo wörld"}'.encode()
    [accepted] = await store.add_events([new_event("e1", "t.x", body=body)])
    job_id = accepted.job_ids[0]
    whole = await store.event_body(job_id, 1 << 20)
    assert (whole.head, whole.size_bytes, whole.truncated) == (body, len(body), False)
    assert (whole.event_id, whole.type, whole.body_purged_at) == (accepted.event_id, "t.x", None)
    part = await store.event_body(job_id, 12)
    assert part.head == body[:12] and part.truncated and part.size_bytes == len(body)
    with pytest.raises(NotFound):
        await store.event_body(job_id + 1000, 10)


async def test_event_body_of_another_tenants_job_is_not_found(store):
    """With `tenant`, event_body answers only for that tenant's jobs: another tenant's job is
    NotFound, exactly as a job that does not exist (the tenant API's payload route)."""
    for tenant in ("acme", "globex"):
        await store.put_tenant(tenant, TenantFields())
        await store.add_destination(name="hooks", url="https://example.com/h",
                                    secret="whsec_" + "A" * 32, event_types=["*"],
                                    max_in_flight=2, tenant=tenant)
    [acme] = await store.add_events([new_event("e1", "t.x", body=b'{"for": "acme"}',
                                               tenant="acme")])
    job_id = acme.job_ids[0]
    assert (await store.event_body(job_id, 100, tenant="acme")).head == b'{"for": "acme"}'
    assert (await store.event_body(job_id, 100)).head == b'{"for": "acme"}'  # the operator's
    with pytest.raises(NotFound):
        await store.event_body(job_id, 100, tenant="globex")
