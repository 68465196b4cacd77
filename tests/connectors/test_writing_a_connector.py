"""docs/writing-a-connector.md followed end to end: the toy connector written from it
(tests/connectors/kv_lookup.py) joins rows through the engine against a real server
(tests/support/kv_server.py): hits, misses, a bad value, batches, a store that stops
answering, its own waits held back, one-line checks, and no password anywhere.
(Its Spark half: tests/spark/join/test_writing_a_connector_join.py.)"""

from __future__ import annotations

import ast
import asyncio
import pickle
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from enrich import DecodeError, LookupFailed, SourceUnavailable, lookup_rows
from enrich.engine.mailbox.hold import Hold, reset_hold, set_hold
from enrich.engine.runtime import run_sync
from enrich.spi import LookupSource
from enrich.testing import FakeClock
from jobs.check import check_store
from tests.connectors.kv_lookup import KvLookup
from tests.support.kv_fixtures import KV_PASSWORD
from tests.support.kv_server import KvServer

pytestmark = pytest.mark.timeout(60)

SCHEMA = "name string, tier int"


def users(server: KvServer, **settings: Any) -> KvLookup:
    return KvLookup(server.url, schema=SCHEMA, **settings)


def fill(server: KvServer) -> None:
    server.data.update(
        {
            "u1": '{"name": "Ada", "tier": 2}',
            "u2": '{"name": "Bob", "tier": "gold"}',  # does not fit the schema
            "u3": "not json",
            "7": '{"name": "Seven"}',  # an int key; tier absent: null
        }
    )


@pytest_asyncio.fixture
async def source(kv_store: KvServer) -> AsyncIterator[KvLookup]:
    fill(kv_store)
    users_ = users(kv_store)
    yield users_
    await users_.aclose()


@pytest.mark.asyncio
async def test_lookup_many_answers_rows_misses_and_a_key_s_own_error(source: KvLookup) -> None:
    assert isinstance(source, LookupSource)
    found = await source.lookup_many(["u1", "u9", "u2", "u3", 7])
    assert found["u1"] == ("Ada", 2)
    assert found[7] == ("Seven", None)
    assert found["u9"] is None
    assert isinstance(found["u2"], DecodeError)
    assert str(found["u2"]) == "key 'u2': field 'tier': cannot read 'gold' as int"
    assert found["u2"].field == "tier"
    assert str(found["u3"]) == "key 'u3': 'not json' is not JSON"


@pytest.fixture
def runtime_users(kv_store: KvServer) -> Iterator[Callable[..., KvLookup]]:
    """Sources for the sync entry points, which run on the runtime loop: closed there."""
    made: list[KvLookup] = []

    def make(**settings: Any) -> KvLookup:
        made.append(users(kv_store, **settings))
        return made[-1]

    yield make
    for source in made:
        run_sync(source.aclose)


def test_lookup_rows_joins_through_the_engine(
    kv_store: KvServer, runtime_users: Callable[..., KvLookup]
) -> None:
    fill(kv_store)
    keys = ["u1", "u9", "u2", None, "u1", 7]
    rows = list(
        lookup_rows(
            ({"order": i, "user_id": k} for i, k in enumerate(keys)),
            runtime_users(max_keys=2),
            on="user_id",
            on_error="error_column",
        )
    )
    assert [(r["order"], r["name"], r["tier"]) for r in rows] == [
        (0, "Ada", 2),
        (1, None, None),
        (2, None, None),
        (3, None, None),
        (4, "Ada", 2),
        (5, "Seven", None),
    ]
    errors = [r["enrich_error"] for r in rows]
    assert errors[2] == "decode: key 'u2': field 'tier': cannot read 'gold' as int"
    assert errors[:2] + errors[3:] == [None] * 5
    # Each distinct key asked once (a null key: never), at most max_keys per MGET.
    asked = [key for request in kv_store.requests for key in request]
    assert sorted(asked) == ["7", "u1", "u2", "u9"]
    assert all(len(request) <= 2 for request in kv_store.requests)


def test_a_store_that_stops_answering_fails_its_rows_after_the_connector_s_timeout(
    kv_store: KvServer, runtime_users: Callable[..., KvLookup]
) -> None:
    fill(kv_store)
    kv_store.silent.set()
    rows = [{"user_id": "u1"}, {"user_id": "u2"}]
    # The join's own timeout is far off: the connector's bound on its request ends it.
    joined = lookup_rows(
        rows, runtime_users(timeout=0.2), on="user_id", on_error="error_column", timeout=60
    )
    errors = [row["enrich_error"] for row in joined]
    assert errors == [f"timeout: kv store {masked(kv_store)} did not connect within 0.2s"] * 2
    with pytest.raises(LookupFailed, match=r"did not connect within 0\.2s") as failed:
        list(lookup_rows(rows, runtime_users(timeout=0.2), on="user_id", timeout=60))
    assert KV_PASSWORD not in str(failed.value)


@pytest.mark.asyncio
async def test_a_request_not_answered_is_bounded_and_its_connection_dropped(
    kv_store: KvServer,
) -> None:
    fill(kv_store)
    slow = users(kv_store, timeout=0.2)
    assert await slow.lookup_many(["u1"]) == {"u1": ("Ada", 2)}  # a connection is open
    kv_store.silent.set()
    with pytest.raises(LookupFailed, match=r"did not answer 1 key\(s\) within 0\.2s") as failed:
        await slow.lookup_many(["u1"])
    assert failed.value.kind == "timeout" and failed.value.retryable
    kv_store.silent.clear()
    # The timed-out connection may still carry a late answer: a new one serves the next.
    assert await slow.lookup_many(["u9", "u1"]) == {"u9": None, "u1": ("Ada", 2)}
    assert kv_store.connections == 2
    await slow.aclose()


@pytest.mark.asyncio
async def test_waiting_for_a_connection_of_the_pool_is_held_back(kv_store: KvServer) -> None:
    fill(kv_store)
    one = users(kv_store, pool_size=1, timeout=30)
    assert await one.lookup_many(["u1"]) == {"u1": ("Ada", 2)}  # its one connection opened
    kv_store.silent.set()
    first = asyncio.ensure_future(one.lookup_many(["u1"]))  # takes the only connection
    while len(kv_store.requests) < 2:
        await asyncio.sleep(0.01)  # until the store has read its MGET (and ignored it)
    clock = FakeClock()
    hold = Hold(clock)
    token = set_hold(hold)  # the engine sets a row's hold so; tasks made now inherit it
    second = asyncio.ensure_future(one.lookup_many(["u1"]))
    reset_hold(token)
    for _ in range(100):  # loop turns, not time: it queues at its first await
        if hold.is_held() or second.done():
            break
        await asyncio.sleep(0)
    assert hold.is_held()  # queued behind the first request, for our own pool
    clock.advance(1.5)
    kv_store.silent.clear()
    first.cancel()  # its connection is closed and its place handed to the second
    assert await second == {"u1": ("Ada", 2)}
    assert not hold.is_held() and hold.held() == 1.5
    await one.aclose()


def masked(server: KvServer) -> str:
    return f"kv://***@127.0.0.1:{server.port}"


def test_enrich_check_names_each_failure_in_one_line_without_the_password(
    kv_store: KvServer,
) -> None:
    fill(kv_store)
    found = check_store("users", users(kv_store), "u1")
    assert found.ok and found.detail.startswith("key 'u1' found in ")
    missing = check_store("users", users(kv_store), "nobody")
    assert missing.ok and missing.detail.startswith("key 'nobody' not found (the store answered)")
    bad = check_store("users", users(kv_store), "u3")
    assert not bad.ok and "key 'u3': 'not json' is not JSON" in bad.detail

    wrong = KvLookup(f"kv://:wrong-pw@127.0.0.1:{kv_store.port}", schema=SCHEMA)
    refused = check_store("users", wrong, "u1")
    assert refused.line() == (
        f"FAILED store 'users': SourceUnavailable: kv store {masked(kv_store)} refused the "
        f"password: 'ERR wrong password' (KvLookup('{masked(kv_store)}', pool_size=4))"
    )
    gone = users(kv_store)
    kv_store.stop()
    down = check_store("users", gone, "u1")
    assert not down.ok
    assert down.detail.startswith(f"SourceUnavailable: kv store {masked(kv_store)} is unreachable")
    for line in (found, missing, bad, refused, down):
        assert KV_PASSWORD not in line.line() and "wrong-pw" not in line.line()
        assert "\n" not in line.line()


@pytest.mark.asyncio
async def test_an_unreachable_store_raises_source_unavailable(kv_store: KvServer) -> None:
    gone = users(kv_store)
    kv_store.stop()
    with pytest.raises(SourceUnavailable, match="is unreachable") as failed:
        await gone.lookup_many(["u1"])
    assert failed.value.kind == "connection" and KV_PASSWORD not in str(failed.value)
    await gone.aclose()


def test_a_description_is_checked_once_picklable_and_keeps_its_secret() -> None:
    url = f"kv://:{KV_PASSWORD}@127.0.0.1:6000"
    source = KvLookup(url, schema=SCHEMA, pool_size=2, max_keys=8)
    assert repr(source) == "KvLookup('kv://***@127.0.0.1:6000', pool_size=2)"
    assert KV_PASSWORD not in repr(vars(source)["_settings"])
    copy = pickle.loads(pickle.dumps(source))
    assert copy == source and hash(copy) == hash(source)  # copies share one pool
    assert copy != KvLookup(url, schema=SCHEMA, pool_size=3, max_keys=8)
    assert source.preferred_capacity == 4 * 2 * 8
    with pytest.raises(ValueError, match="pool_size must be an int >= 1, got 0"):
        KvLookup(url, schema=SCHEMA, pool_size=0)
    with pytest.raises(ValueError, match="timeout must be a number of seconds > 0"):
        KvLookup(url, schema=SCHEMA, timeout=0)
    with pytest.raises(ValueError, match="url must be kv://") as bad:
        KvLookup(f"redis://:{KV_PASSWORD}@127.0.0.1:6000", schema=SCHEMA)
    assert KV_PASSWORD not in str(bad.value)


def test_the_toy_comes_in_through_the_spi_door() -> None:
    """What the page's first rule asks: enrich.spi and enrich's public face, nothing else."""
    tree = ast.parse(Path(__file__).with_name("kv_lookup.py").read_text())
    imported = {
        node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("enrich")
    }
    imported |= {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("enrich")
    }
    assert imported == {"enrich.spi"}
