"""docs/writing-a-connector.md followed end to end, its Spark half: the toy connector written
from it (tests/connectors/kv_lookup.py) in a ``lookup_join`` on a local Spark, against the
real key-value server of tests/support/kv_server.py: hits, a miss, a bad value, a store
that stops answering, a refused password named without it, and the join's default bound
taken from the connector."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from enrich.spark import lookup_join
from enrich.spark.join.join_frame import join_settings
from enrich.spark.stages.operator_settings import LOOKUP_JOIN
from tests.connectors.kv_lookup import KvLookup
from tests.support.kv_fixtures import KV_PASSWORD
from tests.support.kv_server import KvServer

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SCHEMA = "name string, tier int"
KEYS = ["u1", "u9", "u2", None, "u1", "u3"]


def orders(spark: SparkSession) -> DataFrame:
    rows = [(i, key) for i, key in enumerate(KEYS)]
    return spark.createDataFrame(rows, "order_id long, user_id string").repartition(2)


def joined(spark: SparkSession, url: str, **settings: Any) -> list[tuple[Any, ...]]:
    users = KvLookup(url, schema=SCHEMA, **settings)
    frame = lookup_join(orders(spark), users, on="user_id", how="left", on_error="error_column")
    return sorted(tuple(row) for row in frame.collect())


def test_a_lookup_join_through_the_toy_connector(spark: SparkSession, kv_store: KvServer) -> None:
    kv_store.data.update(
        {"u1": '{"name": "Ada", "tier": 2}', "u2": '{"name": "Bob", "tier": "gold"}'}
    )
    kv_store.data["u3"] = '{"name": "Cy"}'
    bad = "decode: key 'u2': field 'tier': cannot read 'gold' as int"
    assert joined(spark, kv_store.url) == [
        (0, "u1", "Ada", 2, None),
        (1, "u9", None, None, None),  # a miss
        (2, "u2", None, None, bad),
        (3, None, None, None, None),  # a null key asks nothing
        (4, "u1", "Ada", 2, None),
        (5, "u3", "Cy", None, None),
    ]
    assert None not in {key for request in kv_store.requests for key in request}


def test_a_store_that_stops_answering_times_the_rows_out(
    spark: SparkSession, kv_store: KvServer
) -> None:
    kv_store.silent.set()
    rows = joined(spark, kv_store.url, timeout=0.5)
    reasons = {row[-1] for row in rows if row[1] is not None}
    assert reasons == {
        f"timeout: kv store kv://***@127.0.0.1:{kv_store.port} did not connect within 0.5s"
    }


def test_a_refused_password_fails_the_job_without_showing_it(
    spark: SparkSession, kv_store: KvServer
) -> None:
    wrong = KvLookup(f"kv://:wrong-pw@127.0.0.1:{kv_store.port}", schema=SCHEMA)
    frame = lookup_join(orders(spark), wrong, on="user_id", on_error="fail")
    assert "wrong-pw" not in frame._jdf.queryExecution().toString()
    with pytest.raises(Exception, match="refused the password") as failed:
        frame.collect()
    assert "wrong-pw" not in str(failed.value) and KV_PASSWORD not in str(failed.value)


def test_the_join_admits_what_the_connector_prefers(kv_store: KvServer) -> None:
    users = KvLookup(kv_store.url, schema=SCHEMA, pool_size=2, max_keys=64)
    assert join_settings(LOOKUP_JOIN, users, None, {}, on="user_id").capacity == 4 * 2 * 64
    given = join_settings(LOOKUP_JOIN, users, None, {"capacity": 10}, on="user_id")
    assert given.capacity == 10
