"""Lookups against a 3-master Redis Cluster: MGET split by slot, hashes, per-key errors."""

from __future__ import annotations

import json

import pytest
import redis
from redis.crc import key_slot

from enrich import LookupFailed
from tests.connectors.redis.conftest import MakeLookup
from tests.support.redis_server import RedisClusterServers


def _calls_per_node(cluster: RedisClusterServers, command: str) -> list[int]:
    calls = []
    for node in cluster.node_clients():
        entry = node.info("commandstats").get(f"cmdstat_{command}")
        calls.append(0 if entry is None else int(entry["calls"]))
    return calls


@pytest.mark.asyncio
async def test_json_lookups_span_all_masters(
    redis_cluster: RedisClusterServers, cluster_client: redis.RedisCluster, make_lookup: MakeLookup
) -> None:
    keys = list(range(300))
    cluster_client.mset_nonatomic({f"user:{i}": json.dumps({"i": i}) for i in keys})
    source = make_lookup(
        redis_cluster.url, cluster=True, key_template="user:{}", value="json", schema="i int"
    )

    result = await source.lookup_many([*keys, 1000])

    assert result == {**{i: (i,) for i in keys}, 1000: None}
    mgets = _calls_per_node(redis_cluster, "mget")
    assert all(calls > 0 for calls in mgets), mgets
    slots = {key_slot(f"user:{i}".encode()) for i in [*keys, 1000]}
    assert sum(mgets) == len(slots)  # one MGET per slot: never a cross-slot MGET


@pytest.mark.asyncio
async def test_hash_tag_keeps_keys_on_one_slot_and_chunks(
    redis_cluster: RedisClusterServers, cluster_client: redis.RedisCluster, make_lookup: MakeLookup
) -> None:
    cluster_client.mset_nonatomic({f"{{acct}}:{i}": json.dumps({"i": i}) for i in range(250)})
    source = make_lookup(
        redis_cluster.url,
        cluster=True,
        key_template="{{acct}}:{}",
        value="json",
        schema="i int",
        max_batch=100,
    )

    result = await source.lookup_many(list(range(250)))

    assert result == {i: (i,) for i in range(250)}
    assert sorted(_calls_per_node(redis_cluster, "mget")) == [0, 0, 3]


@pytest.mark.asyncio
async def test_cluster_hashes_with_wrongtype_per_key(
    redis_cluster: RedisClusterServers, cluster_client: redis.RedisCluster, make_lookup: MakeLookup
) -> None:
    for i in range(30):
        cluster_client.hset(f"h:{i}", mapping={"name": f"n{i}", "age": str(i)})
    cluster_client.set("h:bad", "not a hash")
    source = make_lookup(
        redis_cluster.url,
        cluster=True,
        key_template="h:{}",
        value="hash",
        schema="name string, age int",
        fields=["name", "age"],
    )

    result = await source.lookup_many([*range(30), "bad", "none"])

    assert {k: result[k] for k in range(30)} == {i: (f"n{i}", i) for i in range(30)}
    assert result["none"] is None
    error = result["bad"]
    assert isinstance(error, LookupFailed)
    assert (error.kind, error.retryable) == ("wrongtype", False)
    assert all(calls > 0 for calls in _calls_per_node(redis_cluster, "hmget"))
