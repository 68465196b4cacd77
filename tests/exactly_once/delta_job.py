"""The streaming job the Delta crash runs kill: kafka (3 partitions) -> lookup_join
(Redis) -> Delta's streaming sink, as its own process (``python -m
tests.exactly_once.delta_job``), run in the Delta venv (pyspark 4.2 with Delta's jars).

Args: bootstrap, source topic, Redis URL, table path, checkpoint, maxOffsetsPerTrigger.
Reads with ``Trigger.AvailableNow`` (the topic up to its end at start-up, in batches of
at most maxOffsetsPerTrigger records) and exits 0 once it is all in the table.
"""

from __future__ import annotations

import os
import sys

from connectors.redis import RedisLookup
from enrich.demo.kafka_broker import connector_jars
from enrich.spark import lookup_join, session
from enrich.spark.sink.delta.jars import delta_conf
from tests.exactly_once.kafka_job import read_orders


def main(bootstrap: str, source: str, url: str, table: str, checkpoint: str, limit: str) -> None:
    conf = delta_conf(snapshot_partitions=2)
    jars = [conf.pop("spark.jars"), *(str(j) for j in connector_jars())]
    spark = session(
        "delta-crash",
        "local[2]",
        spark__ui__enabled="false",
        spark__ui__showConsoleProgress="false",
        spark__sql__shuffle__partitions="2",
        spark__jars=",".join(jars),
        **{key.replace(".", "__"): value for key, value in conf.items()},
    )
    spark.sparkContext.setLogLevel("ERROR")
    orders = read_orders(spark, bootstrap, source, limit)
    users = RedisLookup(url, key_template="user:{}", value="hash", schema="name string")
    joined = lookup_join(orders, users, on="order_id")
    out = joined.select("order_id", "name", "topic", "partition", "offset")
    query = (
        out.writeStream.format("delta")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(table)
    )
    query.awaitTermination()
    print("drained", flush=True)
    spark.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main(*sys.argv[1:7])
