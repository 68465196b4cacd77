"""Lookup-join semantics against the scriptable FakeSource (deterministic, no I/O)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import enrich
from enrich import FixedDelayRetry, LookupCache, LookupJoin, lookup_chunks_async, lookup_rows
from enrich.testing import FakeClock, FakeSource, drive

USERS = {
    1: ("ann", "gold"),
    2: ("bob", "silver"),
    3: [("cy", "a"), ("cy", "b")],  # 1:N
    4: None,  # a stored miss
}
SCHEMA = "name string, tier string"


def rows(*ids: Any) -> list[dict[str, Any]]:
    return [{"order": n, "user_id": uid} for n, uid in enumerate(ids)]


def test_left_join_keeps_misses_with_null_fields() -> None:
    source = FakeSource(USERS, schema=SCHEMA)
    out = list(lookup_rows(rows(1, 9, 2, None), source, on="user_id"))
    assert out == [
        {"order": 0, "user_id": 1, "name": "ann", "tier": "gold"},
        {"order": 1, "user_id": 9, "name": None, "tier": None},
        {"order": 2, "user_id": 2, "name": "bob", "tier": "silver"},
        {"order": 3, "user_id": None, "name": None, "tier": None},
    ]
    assert sorted(source.keys_requested) == [1, 2, 9]  # a null key asks nothing


def test_inner_join_drops_misses_and_null_keys() -> None:
    source = FakeSource(USERS, schema=SCHEMA)
    out = list(lookup_rows(rows(1, 9, 4, None, 2), source, on="user_id", how="inner"))
    assert [r["user_id"] for r in out] == [1, 2]


def test_one_to_many_yields_a_row_per_match() -> None:
    source = FakeSource(USERS, schema=SCHEMA)
    out = list(lookup_rows(rows(3, 1), source, on="user_id", prefix="u_"))
    assert [(r["user_id"], r["u_tier"]) for r in out] == [(3, "a"), (3, "b"), (1, "gold")]


def test_composite_keys() -> None:
    source = FakeSource({("eu", 1): ("x",)}, schema="v string")
    data = [{"region": "eu", "id": 1}, {"region": "us", "id": 1}, {"region": None, "id": 2}]
    out = list(lookup_rows(data, source, on=["region", "id"]))
    assert [r["v"] for r in out] == ["x", None, None]
    assert source.keys_requested == [("eu", 1), ("us", 1)]


def test_equal_keys_in_flight_are_coalesced_into_one_request() -> None:
    source = FakeSource(USERS, schema=SCHEMA)
    it = lookup_rows(rows(*([1] * 50 + [2] * 50)), source, on="user_id", capacity=100)
    assert len(list(it)) == 100
    assert source.requests == [[1, 2]]


def test_distinct_keys_are_batched_up_to_max_batch() -> None:
    data = {k: (str(k),) for k in range(1000)}
    source = FakeSource(data, schema="v string")
    it = lookup_rows(({"k": k} for k in range(1000)), source, on="k", capacity=1000, max_batch=100)
    assert [r["v"] for r in it] == [str(k) for k in range(1000)]
    assert len(source.requests) == 10
    assert all(len(call) == 100 for call in source.requests)


def test_colliding_field_names_are_an_error_naming_them() -> None:
    source = FakeSource(USERS, schema=SCHEMA)
    with pytest.raises(ValueError, match=r"\['name'\] collide"):
        list(lookup_rows([{"user_id": 1, "name": "x"}], source, on="user_id"))


def test_a_row_that_is_not_a_mapping_is_a_clear_error() -> None:
    source = FakeSource(USERS, schema=SCHEMA)
    with pytest.raises(enrich.DecodeError, match=r"row 1 is not a mapping of fields: \[1, 2\]"):
        list(lookup_rows([{"user_id": 1}, [1, 2]], source, on="user_id"))


def test_a_missing_on_field_is_a_clear_error() -> None:
    source = FakeSource(USERS, schema=SCHEMA)
    with pytest.raises(enrich.DecodeError, match="row 0 has no field 'user_id'"):
        list(lookup_rows([{"uid": 1}], source, on="user_id"))


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("null", [("ann", None), (None, None), ("bob", None)]),
        ("drop", [("ann", None), ("bob", None)]),
        (
            "error_column",
            [("ann", None), (None, "status:503: scripted failure of key 7"), ("bob", None)],
        ),
    ],
)
def test_error_policies_keep_the_job_going(policy: str, expected: list[Any]) -> None:
    source = FakeSource(USERS, schema=SCHEMA, fail_keys={7: 99})
    it = lookup_rows(rows(1, 7, 2), source, on="user_id", on_error=policy)
    out = [(r["name"], r.get("enrich_error")) for r in it]
    assert out == expected


def test_fail_policy_raises_the_error() -> None:
    source = FakeSource(USERS, schema=SCHEMA, fail_keys={7: 99})
    with pytest.raises(enrich.LookupFailed, match="scripted failure of key 7"):
        list(lookup_rows(rows(1, 7, 2), source, on="user_id"))


def test_undecodable_values_are_errors_of_their_row_only() -> None:
    bad = enrich.DecodeError("field 'credit': cannot read 'abc' as double", field="credit")
    source = FakeSource({1: ("ann",), 2: bad}, schema="name string")
    it = lookup_rows(rows(1, 2), source, on="user_id", on_error="error_column")
    assert [r["enrich_error"] for r in it] == [
        None,
        "decode: field 'credit': cannot read 'abc' as double",
    ]


def test_unhashable_keys_are_errors_naming_the_row() -> None:
    source = FakeSource(USERS, schema=SCHEMA)
    data = [{"user_id": 1}, {"user_id": [1, 2]}]
    out = list(lookup_rows(data, source, on="user_id", on_error="error_column"))
    assert out[0]["name"] == "ann"
    assert out[1]["enrich_error"].startswith(
        "decode: row 1: key field 'user_id' is a list ([1, 2]); keys must be str, int or bytes"
    )


async def joined(clock: FakeClock, *chunks: Any, **kwargs: Any) -> list[Any]:
    """Run chunks of keys through the join on the fake clock; one triple per output row."""
    kwargs.setdefault("clock", clock)
    it = lookup_chunks_async([(n, keys) for n, keys in enumerate(chunks)], **kwargs)
    out = []
    async for chunk in it:
        errors = chunk.errors or [None] * len(chunk.indices)
        out += [
            (chunk.tag, i, row, error)
            for i, row, error in zip(chunk.indices, chunk.rows, errors, strict=True)
        ]
    return out


@pytest.mark.asyncio
async def test_a_timeout_fails_only_the_rows_still_waiting() -> None:
    clock = FakeClock()
    source = FakeSource({1: ("a",), 2: ("b",)}, clock=clock, never=[2])
    out = await drive(
        clock,
        joined(clock, [1, 2], source=source, on_error="error_column", timeout=1.5, max_batch=1),
    )
    # max_batch=1: each key in a call of its own; key 2's call never answers.
    assert out == [
        (0, 0, ("a",), None),
        (0, 1, None, "timeout: record 2 timed out after 1.5s (1 attempt(s))"),
    ]
    assert clock.now() == 1.5


@pytest.mark.asyncio
async def test_retries_recover_failed_keys_and_whole_call_failures() -> None:
    clock = FakeClock()
    source = FakeSource({1: ("a",), 2: ("b",)}, clock=clock, fail_calls=1, fail_keys={2: 1})
    it = lookup_chunks_async(
        [("c", [1, 2])], source, retry=FixedDelayRetry(3, 0.1), clock=clock, timeout=5
    )
    (chunk,) = await drive(clock, collect(it))
    assert (chunk.indices, chunk.rows) == ([0, 1], [("a",), ("b",)])
    # Call 1 failed whole; both keys went out again together; key 2 failed alone once more.
    assert source.requests == [[1, 2], [1, 2], [2]]
    assert clock.now() == pytest.approx(0.2)
    assert it.function.statistics().retries == 3


@pytest.mark.asyncio
async def test_retries_stop_at_the_deadline_and_the_last_error_stands() -> None:
    clock = FakeClock()
    source = FakeSource({1: ("a",)}, clock=clock, fail_keys={1: 99})
    out = await drive(
        clock,
        joined(
            clock,
            [1],
            source=source,
            retry=FixedDelayRetry(10, 0.4),
            timeout=1.0,
            on_error="error_column",
        ),
    )
    assert out == [(0, 0, None, "status:503: scripted failure of key 1")]
    assert source.keys_requested == [1, 1, 1]  # at 0, 0.4, 0.8; 1.2 is past the deadline
    assert clock.pending_timers() == 0


@pytest.mark.asyncio
async def test_cache_ttl_and_missing_ttl_are_exact() -> None:
    clock = FakeClock()
    source = FakeSource({1: ("a",)}, clock=clock)
    cache = LookupCache(max_rows=100, ttl=10.0, ttl_missing=2.0)

    async def run(*keys: int) -> list[Any]:
        return await drive(clock, joined(clock, list(keys), source=source, cache=cache))

    assert await run(1, 9) == [(0, 0, ("a",), None), (0, 1, None, None)]
    assert source.keys_requested == [1, 9]
    clock.advance(1.999)
    await run(1, 9)
    assert source.keys_requested == [1, 9]  # both from the cache
    clock.advance(0.001)  # the miss expires at t=2.0 exactly
    await run(1, 9)
    assert source.keys_requested == [1, 9, 9]
    clock.advance(8.0)  # the hit expires at t=10.0
    await run(1)
    assert source.keys_requested == [1, 9, 9, 1]


@pytest.mark.asyncio
async def test_cache_statistics() -> None:
    clock = FakeClock()
    source = FakeSource({1: ("a",)}, clock=clock)
    cache = LookupCache(max_rows=100, ttl=10.0)
    for _ in range(3):
        it = lookup_chunks_async([("c", [1, 2, 1])], source, cache=cache, clock=clock)
        await drive(clock, collect(it))
    stats = it.function.cache_statistics()
    # The cache is read once per distinct key of a chunk. Run 1: 2 misses, 2 loads;
    # runs 2 and 3: 2 hits each.
    assert (stats.hits, stats.misses, stats.loads, stats.size) == (4, 2, 2, 2)
    assert stats.hit_ratio == pytest.approx(4 / 6)


@pytest.mark.asyncio
async def test_cache_without_missing_entries_and_with_lru_eviction() -> None:
    clock = FakeClock()
    source = FakeSource({k: (str(k),) for k in range(5)}, clock=clock)
    cache = LookupCache(max_rows=2, cache_missing=False)
    chunks = [[k] for k in (0, 1, 0, 2, 0, 1, 9, 9)]
    await drive(clock, joined(clock, *chunks, source=source, cache=cache, capacity=1))
    # 0 and 1 cached; 0 touched; 2 evicts 1 (least recent); 1 reloads; 9 never cached.
    assert source.keys_requested == [0, 1, 2, 1, 9, 9]


@pytest.mark.asyncio
async def test_a_retry_on_a_miss_is_never_answered_by_a_cached_miss() -> None:
    clock = FakeClock()
    source = FakeSource({}, clock=clock)
    cache = LookupCache(max_rows=10, ttl=60)
    retry = FixedDelayRetry(3, 1.0, retry_on_result=enrich.retry_on_empty)

    async def arrive_later() -> None:
        await clock.sleep(1.5)
        source.data[5] = ("late",)

    arrival = asyncio.ensure_future(arrive_later())
    out = await drive(
        clock, joined(clock, [5], source=source, cache=cache, retry=retry, timeout=None)
    )
    assert out == [(0, 0, ("late",), None)]
    assert source.keys_requested == [5, 5, 5]
    assert arrival.done()


@pytest.mark.asyncio
async def test_two_joins_share_the_process_cache() -> None:
    clock = FakeClock()
    source = FakeSource({1: ("a",)}, clock=clock)
    cache = LookupCache(max_rows=10)
    for _ in range(3):
        await drive(clock, joined(clock, [1], source=source, cache=cache))
    assert source.keys_requested == [1]


@pytest.mark.asyncio
async def test_metrics_count_requests_coalescing_and_latency() -> None:
    clock = FakeClock()
    source = FakeSource({k: (str(k),) for k in range(10)}, clock=clock, latency=0.02)
    keys = [k % 10 for k in range(30)]
    chunks = [keys[i : i + 8] for i in range(0, 30, 8)]  # 4 chunks: all in flight at once
    it = lookup_chunks_async(list(enumerate(chunks)), source, clock=clock, capacity=40, max_batch=4)
    assert sum(len(c.indices) for c in await drive(clock, collect(it))) == 30
    m = it.function.statistics()
    assert (m.rows_in, m.rows_out, m.requests, m.keys_requested) == (30, 30, 3, 10)
    assert m.coalesced == 20
    assert m.keys_per_request == pytest.approx(10 / 3)
    assert m.latency_p50 == pytest.approx(0.02, rel=0.1)
    assert "3 requests" in m.summary()


def test_a_chunk_larger_than_the_chunk_size_is_refused() -> None:
    source = FakeSource(USERS, schema=SCHEMA)
    assert enrich.chunk_rows(100) == 25
    with pytest.raises(ValueError, match="a chunk of 26 rows is larger than 25"):
        list(enrich.lookup_chunks([("c", list(range(26)))], source, capacity=100))

    async def run_async() -> None:
        it = enrich.lookup_chunks_async([("c", list(range(26)))], source, capacity=100)
        async for _ in it:
            pass

    with pytest.raises(ValueError, match="a chunk of 26 rows is larger than 25"):
        asyncio.run(run_async())


async def collect(iterator: Any) -> list[Any]:
    return [item async for item in iterator]


def test_settings_are_validated() -> None:
    source = FakeSource(USERS, schema=SCHEMA)
    with pytest.raises(ValueError, match="how must be one of"):
        LookupJoin(source, how="outer")
    with pytest.raises(ValueError, match="on_error must be one of"):
        LookupJoin(source, on_error="ignore")
    with pytest.raises(ValueError, match="max_batch must be an int >= 1, got 0"):
        LookupJoin(source, max_batch=0)
    with pytest.raises(ValueError, match="capacity must be an int >= 1, got 0"):
        lookup_rows([], source, on="x", capacity=0)
    with pytest.raises(ValueError, match="eviction is mandatory"):
        LookupCache(max_rows=None, ttl=None)
    with pytest.raises(ValueError, match="ttl must be a number > 0 or None, got -1"):
        LookupCache(ttl=-1)
