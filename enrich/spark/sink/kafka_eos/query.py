"""The checks of a query's shape the sink cannot see from its options: which sources it
reads, whether a source partition is split over several tasks, whether it holds state.

:func:`kafka_eos_writer` runs them on the query's analyzed plan, then returns the
``kafka-eos`` writer (under async progress tracking with ``low_latency=True``). A bare
``writeStream.format("kafka-eos")`` skips them; the sink then still refuses rows without
their source columns, and stops at a batch's commit when two tasks wrote one source
partition (:class:`~enrich.spark.sink.kafka_eos.eos_errors.SourcePartitionSplit`).
"""

from __future__ import annotations

from typing import Any

from .eos_errors import KafkaSinkRefused, SourceNotKeyed, SourcePartitionSplit, StatefulQuery
from .eos_sink import NAME

SOURCES = ("kafka", "redis-stream")
# Logical plan nodes that keep state between micro-batches.
STATEFUL = {
    "Aggregate": "an aggregation",
    "Deduplicate": "a deduplication (dropDuplicates)",
    "DeduplicateWithinWatermark": "a deduplication (dropDuplicatesWithinWatermark)",
    "FlatMapGroupsWithState": "a (flat)mapGroupsWithState",
    "FlatMapGroupsInPandasWithState": "applyInPandasWithState",
    "TransformWithState": "transformWithState",
    "TransformWithStateInPandas": "transformWithStateInPandas",
    "TransformWithStateInPySpark": "transformWithStateInPandas",
}
# Nodes that move rows between tasks, so one source partition's rows may meet several.
SHUFFLES = {
    "Repartition": "a repartition",
    "RepartitionByExpression": "a repartition (lookup_join's shuffle=, repartition(cols))",
    "RebalancePartitions": "a rebalance",
    "Join": "a join (its shuffle)",
    "Sort": "a sort",
    "Window": "a window function",
    "Expand": "a cube or rollup",
}
# Source options that cut one source partition into several tasks.
SPLITTING = {"kafka": ("minPartitions", "maxRecordsPerPartition")}
ASYNC = "asyncProgressTrackingEnabled"
OVERRIDE = "_asyncProgressTrackingOverrideSinkSupportCheck"
TRIGGER = "0 seconds"


def _nodes(plan: Any) -> list[Any]:
    found, todo = [], [plan]
    while todo:
        node = todo.pop()
        found.append(node)
        children = node.children()
        todo.extend(children.apply(i) for i in range(children.size()))
    return found


def _source_of(leaf: Any) -> tuple[str, dict[str, str]]:
    try:
        name = str(leaf.sourceName())
    except Exception:
        name = str(leaf.getClass().getSimpleName())
    options: dict[str, str] = {}
    try:
        extra = leaf.extraOptions()
        for key in ("minPartitions", "maxRecordsPerPartition", "partitionsPerStream"):
            value = extra.get(key)
            if value is not None:
                options[key] = str(value)
    except Exception:
        pass
    return name, options


def check_query(df: Any) -> None:
    """Refuse a query the sink cannot keep exactly once (see the module docstring).

    Raises:
        KafkaSinkRefused: not streaming, or a Spark Connect DataFrame (its plan is not
            readable here).
        SourceNotKeyed: a source other than Kafka or redis-stream.
        SourcePartitionSplit: a shuffle before the sink, or a splitting source option.
        StatefulQuery: an operator keeping state between batches.
    """
    if not df.isStreaming:
        raise KafkaSinkRefused(
            "kafka_eos_writer is for streaming queries; a batch write uses "
            'df.write.format("kafka-eos")'
        )
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        raise KafkaSinkRefused(
            "kafka_eos_writer reads the query's plan, which a Spark Connect DataFrame does "
            'not expose: use a classic session, or writeStream.format("kafka-eos") (then '
            "the plan's shape is not checked before the first batch)"
        )
    nodes = _nodes(jdf.queryExecution().analyzed())
    for node in nodes:
        kind = str(node.getClass().getSimpleName())
        if kind in STATEFUL:
            raise StatefulQuery(
                f"the kafka-eos sink writes each source record's rows once, keyed by the "
                f"record; this query holds {STATEFUL[kind]}, whose rows are not one "
                "source record's: write its output with Spark's kafka sink (at least once), "
                "or keep the state out of the query"
            )
        if kind in SHUFFLES:
            raise SourcePartitionSplit(
                f"the kafka-eos sink needs each source partition's rows of a batch in one "
                f"task; this query has {SHUFFLES[kind]} before the sink, which spreads them "
                "over several tasks: drop it"
            )
    leaves = [n for n in nodes if n.children().size() == 0 and n.isStreaming()]
    for leaf in leaves:
        name, options = _source_of(leaf)
        if name not in SOURCES:
            raise SourceNotKeyed(
                f"the kafka-eos sink needs Kafka or redis-stream sources, whose rows carry "
                f"their record (topic/partition/offset, stream_key/stream_id); this query "
                f"reads {name}"
            )
        for option in SPLITTING.get(name, ()):
            if option in options:
                raise SourcePartitionSplit(
                    f"the kafka source's option {option} ({options[option]}) splits a Kafka "
                    "partition over several tasks, which the kafka-eos sink cannot keep "
                    "exactly once: drop it"
                )
        if name == "redis-stream" and options.get("partitionsPerStream", "").strip() != "1":
            raise SourcePartitionSplit(
                "the redis-stream source splits each stream over several tasks unless "
                '.option("partitionsPerStream", 1): set it for the kafka-eos sink (one '
                "task per stream)"
            )


def kafka_eos_writer(df: Any, *, low_latency: bool = False) -> Any:
    """``df.writeStream.format("kafka-eos")`` after :func:`check_query`; add the sink's
    options (``kafka.bootstrap.servers``, ``topic``, ``checkpointLocation``) and
    ``start()``.

    Args:
        df: a streaming DataFrame read from Kafka or redis-stream sources.
        low_latency: run under Spark's async progress tracking (the offset and commit
            logs written off the batches' path, a processing-time trigger of 0), as
            :func:`enrich.spark.low_latency` does for the redis sink: safe here because
            the sink skips records by their source marks, not by batch id, so batches
            re-cut after a failure write nothing twice.
    """
    check_query(df)
    writer = df.writeStream.format(NAME)
    if low_latency:
        writer = writer.option(ASYNC, "true").option(OVERRIDE, "true")
        writer = writer.trigger(processingTime=TRIGGER)
    return writer
