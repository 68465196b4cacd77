"""The cache store's bulk methods (``get_many``, ``put_many``): exact TTL edges on a fake
clock, and the same outcomes, counters and entries as the per-key ``get`` and ``put``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from enrich import LookupCache
from enrich.lookup.cache.lookup_cache import MISS, CacheStore
from enrich.testing import FakeClock

pytestmark = pytest.mark.timeout(60)


def store(**options: Any) -> CacheStore:
    return LookupCache(**options).storage("test")


def counters(cache: CacheStore) -> tuple[int, ...]:
    s = cache.statistics()
    return (s.hits, s.misses, s.loads, s.load_failures, s.evictions, s.size)


def test_get_many_hits_until_just_before_expiry_and_misses_at_expiry() -> None:
    clock = FakeClock()
    cache = store(max_rows=100, ttl=10.0, ttl_missing=2.0)
    cache.put_many([1, 2, 3], [("a",), MISS, [("b",), ("c",)]], clock.now())
    clock.advance(2.0 - 1e-9)
    assert cache.get_many([1, 2, 3, 4], clock.now()) == [("a",), MISS, [("b",), ("c",)], None]
    clock.advance(1e-9)  # t = 2.0: the miss expires exactly now, the rows stay
    assert clock.now() == 2.0
    assert cache.get_many([2, 1], clock.now()) == [None, ("a",)]
    assert cache.statistics().size == 2  # the expired miss is gone, as get() drops it
    clock.advance(8.0 - 1e-9)
    assert cache.get_many([1, 3], clock.now()) == [("a",), [("b",), ("c",)]]
    clock.advance(1e-9)  # t = 10.0
    assert clock.now() == 10.0
    assert cache.get_many([3, 1], clock.now()) == [None, None]
    # hits: 3 + 1 + 2; misses: 1 + 1 + 2; loads: 3; nothing left.
    assert counters(cache) == (6, 4, 3, 0, 0, 0)


def test_put_many_takes_each_kind_of_entry_with_its_own_ttl() -> None:
    clock = FakeClock(100.0)
    cache = store(max_rows=None, ttl=5, ttl_missing=1)
    cache.put_many(["x", "y"], [MISS, ("row",)], clock.now())
    assert dict(cache.entries()) == {"x": (101.0, MISS), "y": (105.0, ("row",))}
    forever = store(max_rows=10)
    forever.put_many(["x"], [("row",)], clock.now())
    clock.advance(1e9)
    assert forever.get_many(["x"], clock.now()) == [("row",)]


def test_put_many_leaves_misses_out_unless_they_are_cached() -> None:
    cache = store(max_rows=10, cache_missing=False)
    cache.put_many([1, 2, 3], [MISS, ("two",), MISS], 0.0)
    assert cache.get_many([1, 2, 3], 0.0) == [None, ("two",), None]
    assert counters(cache) == (1, 2, 1, 0, 0, 1)  # one load: the misses were not put


def test_put_many_evicts_the_least_recently_used_first() -> None:
    cache = store(max_rows=3)
    cache.put_many([1, 2, 3], [("1",), ("2",), ("3",)], 0.0)
    assert cache.get_many([1], 0.0) == [("1",)]  # 1 is now the most recent
    cache.put_many([4, 5], [("4",), ("5",)], 0.0)  # 2 and 3 leave
    assert [key for key, _ in cache.entries()] == [1, 4, 5]
    cache.put_many([1, 6], [("one",), ("6",)], 0.0)  # 1 refreshed (rows and recency)
    assert [key for key, _ in cache.entries()] == [5, 1, 6]
    assert cache.get_many([1], 0.0) == [("one",)]
    assert cache.statistics().evictions == 3


def test_failed_counts_several_failures_at_once() -> None:
    cache = store(max_rows=10)
    cache.failed()
    cache.failed(3)
    assert cache.statistics().load_failures == 4


# -- the bulk methods against the per-key ones ----------------------------------------

KEY = st.integers(0, 7)
ROWS = st.one_of(
    st.just(MISS), st.tuples(st.integers(0, 3)), st.lists(st.tuples(st.integers(0, 3)), min_size=1)
)
STEP = st.one_of(
    st.tuples(st.just("get"), st.lists(KEY, unique=True, max_size=6)),
    st.tuples(st.just("put"), st.lists(st.tuples(KEY, ROWS), max_size=6)),
    st.tuples(st.just("wait"), st.sampled_from([0.5, 1.0, 2.0, 3.0])),
)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(STEP, max_size=25),
    max_rows=st.one_of(st.none(), st.integers(1, 5)),
    ttl=st.one_of(st.none(), st.sampled_from([1.0, 2.0, 3.5])),
    ttl_missing=st.one_of(st.none(), st.sampled_from([1.0, 2.0])),
    cache_missing=st.booleans(),
)
def test_bulk_and_per_key_methods_agree(
    steps: list[tuple[str, Any]],
    max_rows: int | None,
    ttl: float | None,
    ttl_missing: float | None,
    cache_missing: bool,
) -> None:
    if max_rows is None and ttl is None:
        max_rows = 3
    options = dict(max_rows=max_rows, ttl=ttl, ttl_missing=ttl_missing, cache_missing=cache_missing)
    bulk, single = store(**options), LookupCache(**options).storage("single")
    clock = FakeClock()
    bulk_evictions = single_evictions = 0
    for kind, arg in steps:
        now = clock.now()
        if kind == "wait":
            clock.advance(arg)
        elif kind == "get":
            assert bulk.get_many(arg, now) == [single.get(key, now) for key in arg]
        else:
            puts = dict(arg)  # distinct keys, the last rows of each
            before = bulk.statistics().evictions, single.statistics().evictions
            bulk.put_many(list(puts), list(puts.values()), now)
            for key, rows in puts.items():
                single.put(key, rows, now)
            bulk_evictions += bulk.statistics().evictions - before[0]
            single_evictions += single.statistics().evictions - before[1]
        # The same entries, in the same order (the same ones leave next).
        assert bulk.entries() == single.entries()
        b, s = counters(bulk), counters(single)
        assert b[:4] + b[5:] == s[:4] + s[5:]
    # A key evicted and put again by one call counts once in bulk (see put_many).
    assert bulk_evictions <= single_evictions
