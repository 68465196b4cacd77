"""The full cache of an HttpLookup against the real aiohttp test server: the dimension
read from its list endpoint page by page, lookups answered with no request, a failing
reload keeping the old snapshot."""

from __future__ import annotations

import pytest

from enrich import FullCache, FullCacheSource
from enrich.engine.runtime import run_sync
from enrich.testing import FakeClock
from tests.integration.conftest import MakeHttp
from tests.support.full_cache_calls import lookup, stats, wait_load
from tests.support.http_server import LIST_PATH, HttpTestServer

pytestmark = pytest.mark.timeout(60)


def test_the_list_endpoint_is_read_page_by_page_and_lookups_request_nothing(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    for n in range(7):
        http_server.data[str(n)] = {"name": f"n{n}", "age": n}
    http_server.data["bad"] = {"name": "Bad", "age": "not a number"}
    users = make_http(list_url=http_server.url(LIST_PATH + "?page={}&size=3"), list_items="items")
    source = FullCacheSource(users, FullCache(), clock=FakeClock())
    answers = lookup(source, [0, "6", 42])
    # An int key and its text are one key (they would request the same URL).
    assert answers == {0: ("n0", 0), "6": ("n6", 6), 42: None}
    assert isinstance(lookup(source, ["bad"])["bad"], Exception)  # its decode error
    pages = [r.raw_path for r in http_server.requests]
    # 8 items, 3 a page: pages 0-2 hold them, page 3 is empty and ends the listing.
    assert pages == [f"{LIST_PATH}?page={p}&size=3" for p in range(4)]
    assert stats(source).rows == 8
    lookup(source, list(range(100)))
    assert len(http_server.requests) == 4  # no request per key
    run_sync(source.aclose, timeout=10)


def test_a_failing_list_endpoint_keeps_the_old_snapshot_and_is_retried(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    http_server.data["1"] = {"name": "old", "age": 1}
    users = make_http(list_url=http_server.url(LIST_PATH + "?page={}"), list_items="items")
    clock = FakeClock()
    source = FullCacheSource(users, FullCache(reload_interval=30, retry_delay=5), clock=clock)
    assert lookup(source, [1])[1] == ("old", 1)
    http_server.data["1"] = {"name": "new", "age": 1}
    http_server.fail(LIST_PATH, 503, times=1)
    clock.advance(30)
    wait_load(source)
    failed = stats(source)
    assert (failed.loads, failed.failed_loads) == (1, 1)
    assert lookup(source, [1])[1] == ("old", 1)  # still served
    clock.advance(5)  # the retry
    wait_load(source)
    assert lookup(source, [1])[1] == ("new", 1)
    run_sync(source.aclose, timeout=10)


def test_a_source_without_a_list_url_cannot_be_fully_cached(make_http: MakeHttp) -> None:
    with pytest.raises(ValueError, match="can list its whole dimension"):
        FullCacheSource(make_http(), FullCache())
    with pytest.raises(ValueError, match="list_url needs at least one"):
        make_http(list_url="http://127.0.0.1:1/list")
    with pytest.raises(ValueError, match=r"list_url needs one .* slot for the page number"):
        make_http(list_url="http://127.0.0.1:1/list?page={}&size={}")
