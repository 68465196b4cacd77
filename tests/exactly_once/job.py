"""The crash harness's streaming job, run with spark-submit: redis-stream -> lookup_join
against Redis -> a sink ("transactional", "idempotent" or "file"). Exits 0 once every
entry present at start-up is processed (Trigger.AvailableNow). The transactional sink
commits in steps of 15 rows, so a batch of 40 takes three (a kill can land between
them); the sink may write to a Redis of its own (a sixth argument: its URL)."""

from __future__ import annotations

import sys

from connectors.redis import RedisLookup
from enrich import ExponentialBackoffRetry
from enrich.spark import lookup_join, register_data_sources, session

SCHEMA = "stream_id string, order_id long, user_id long, amount double"


STEP_ROWS = 15  # maxRowsPerCommit: three steps a batch of 40


def main(
    source_url: str, dim_url: str, sink: str, checkpoint: str, output: str, sink_url: str = ""
) -> None:
    spark = session(
        "exactly-once-job",
        "local[2]",
        spark__ui__enabled="false",
        spark__sql__shuffle__partitions="2",
        spark__python__worker__reuse="true",
    )
    spark.sparkContext.setLogLevel("ERROR")
    register_data_sources(spark)
    orders = (
        spark.readStream.format("redis-stream")
        .option("url", source_url)
        .option("stream", "orders")
        .option("maxEntriesPerTrigger", 40)
        .schema(SCHEMA)
        .load()
    )
    users = RedisLookup(dim_url, key_template="user:{}", value="json",
                        schema="name string, tier string", timeout=1.0)  # fmt: skip
    # Retries ride out a short outage of the dimension store; past them the task fails
    # and the harness restarts the query from its checkpoint.
    retry = ExponentialBackoffRetry(10, 0.1, 1.0, 2.0)
    enriched = lookup_join(orders, users, on="user_id", timeout=15.0, retry=retry)
    writer = enriched.drop("stream_id").writeStream.option("checkpointLocation", checkpoint)
    if sink == "file":
        writer = writer.format("json").option("path", output)
    else:
        writer = writer.format("redis").option("url", sink_url or source_url)
        writer = writer.option("mode", sink)
        if sink == "transactional":
            writer = writer.option("stream", "enriched").option("maxRowsPerCommit", STEP_ROWS)
        else:
            writer = writer.option("key", "enriched:{order_id}")
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:7])
