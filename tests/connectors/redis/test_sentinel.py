"""Redis Sentinel: a lookup join keeps going through a real failover of the master."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import enrich
from connectors.redis import RedisLookup
from enrich.engine.runtime import run_sync
from tests.support.redis_sentinel import SentinelTopology, start_sentinel_topology
from tests.support.redis_server import RedisUnavailable

ROWS = 3000
KILL_AT = 1000


@pytest.fixture
def sentinel_topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelTopology]:
    try:
        topology = start_sentinel_topology(tmp_path_factory.mktemp("sentinel"))
    except RedisUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    yield topology
    topology.stop()


@pytest.mark.slow
def test_lookup_join_survives_a_failover_and_reads_the_promoted_replica(
    sentinel_topology: SentinelTopology,
) -> None:
    topology = sentinel_topology
    master = topology.client(topology.master)
    master.mset({f"user:{i}": json.dumps({"name": f"n{i}", "credit": i}) for i in range(ROWS)})
    topology.wait_replicated()
    replica = topology.client(topology.replica)
    replica.config_resetstat()
    source = RedisLookup(
        topology.url, key_template="user:{}", value="json", schema="name string, credit int",
        max_batch=50, timeout=1.0,
    )  # fmt: skip

    def rows() -> Iterator[dict[str, Any]]:
        for i in range(ROWS):
            if i == KILL_AT:
                topology.kill_master()  # mid-join: earlier rows are in flight or done
            yield {"id": i}

    try:
        out = list(
            enrich.lookup_rows(
                rows(), source, on="id", how="left", on_error="error_column",
                capacity=100, timeout=30.0, retry=enrich.FixedDelayRetry(100, 0.1),
            )
        )  # fmt: skip
    finally:
        run_sync(source.aclose)

    assert [row["id"] for row in out] == list(range(ROWS))
    failed = [row for row in out if row["enrich_error"] is not None]
    assert failed == []
    assert all(row["name"] == f"n{row['id']}" and row["credit"] == row["id"] for row in out)
    assert topology.reported_master() == ("127.0.0.1", topology.replica.port)
    stats = replica.info("commandstats")
    assert int(stats["cmdstat_mget"]["calls"]) > 0  # rows after the kill came from it
