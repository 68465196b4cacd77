"""Per-key hand-over against real servers: a hanging key costs only its own rows."""

from __future__ import annotations

import pytest
import redis

from enrich import lookup_rows
from tests.integration.conftest import MakeHttp, MakeRedis
from tests.support.gated_clock import GatedClock, OpenWhileOnlySlow
from tests.support.http_server import HttpTestServer
from tests.support.redis_server import RedisServer


@pytest.mark.parametrize("mode", ["ordered", "unordered"])
def test_twenty_keys_keep_their_answers_when_one_never_answers(
    http_server: HttpTestServer, make_http: MakeHttp, mode: str
) -> None:
    for n in range(20):
        http_server.data[f"u{n}"] = {"name": f"n{n}", "age": n}
    http_server.latency["hangs"] = 600.0  # never, within the test
    data = [{"uid": f"u{n}"} for n in range(10)] + [{"uid": "hangs"}]
    data += [{"uid": f"u{n}"} for n in range(10, 20)]
    # The 1 s timeout fires only once the twenty answers reached the join (the gate), so
    # a busy machine cannot time them out too; the request timeout is out of the way.
    clock = GatedClock()
    source = OpenWhileOnlySlow(make_http(timeout=300.0), clock, slow={"hangs"})
    out = list(
        lookup_rows(
            data, source, on="uid", on_error="error_column", timeout=1.0, mode=mode, clock=clock
        )
    )
    by_key = {row["uid"]: row for row in out}
    assert len(out) == 21
    assert [by_key[f"u{n}"]["name"] for n in range(20)] == [f"n{n}" for n in range(20)]
    assert by_key["hangs"]["enrich_error"].startswith("timeout: ")
    assert sum(row["enrich_error"] is not None for row in out) == 1


@pytest.mark.asyncio
async def test_redis_hands_over_each_pipeline_as_it_arrives(
    redis_client: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    for n in range(5):
        redis_client.set(f"h:{n}", f'{{"v": {n}}}')
    source = make_redis(redis_server.url, key_template="h:{}", value="json", schema="v int",
                        max_batch=2)  # fmt: skip
    parts = [dict(found) async for found in source.lookup_each([0, 1, 2, 3, 4, 5.5])]
    # The key that does not fit the template comes first, then the pipelines' answers
    # (three pipelines of two keys at most), each key exactly once.
    assert list(parts[0]) == [5.5] and parts[0][5.5].kind == "key"
    keys = [key for part in parts[1:] for key in part]
    assert sorted(keys) == [0, 1, 2, 3, 4]
    assert {k: v for part in parts[1:] for k, v in part.items()} == {n: (n,) for n in range(5)}
    await source.aclose()
