"""Reading a job's source and writing its sinks with Spark (the only Spark in jobs/ I/O).

A job with a dead-letter sink writes both sinks from one streaming query
(``foreachBatch``), so that each row's lookups run once and every row lands in exactly
one of the two: enriched rows in the sink, rows whose lookup failed in the dead letter,
with the reason in ``enrich_error``. Each part is written with the sink format's batch
writer; a replayed micro-batch is written again (at-least-once), so prefer idempotent
sinks there: a Delta sink or dead letter is written with Delta's idempotent batch
writes (``txnAppId`` from the checkpoint, ``txnVersion`` the batch id), so Delta skips a
replayed batch. A job without a dead letter streams straight into its sink, with the
sink's own guarantees (the Redis sinks' exactly-once commit and Delta's among them).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from jobs import _delta, _stop
from jobs._config import JobConfig
from jobs._endpoints import Endpoint
from jobs._files import ConfigError
from jobs._lookups import DEAD_LETTER

ERROR_COLUMN = "enrich_error"
log = logging.getLogger("enrich.jobs")
_POLL = 0.5  # seconds between looks at a stop request while the query runs


def register_data_sources(spark: Any) -> None:
    """Register the library's Python data sources (``redis-stream``, ``redis``) if this
    version of the library has them, so configs can name those formats."""
    import enrich.spark

    register = getattr(enrich.spark, "register_data_sources", None)
    if register is not None:
        register(spark)


def read(spark: Any, spec: Endpoint) -> Any:
    """The source as a DataFrame (streaming unless ``streaming: false``), with ``select``."""
    reader = (spark.readStream if spec.streaming else spark.read).format(spec.format)
    if spec.schema:
        reader = reader.schema(spec.schema)
    if spec.options:
        reader = reader.options(**spec.options)
    df = reader.load(spec.path) if spec.path else reader.load()
    return df.selectExpr(*spec.select) if spec.select else df


def start(df: Any, config: JobConfig) -> Any:
    """Start the streaming query writing ``df`` to the sink (and the dead letter).

    Returns:
        The running ``StreamingQuery``.
    """
    sink = config.sink or Endpoint(format="console", kind="console")
    if config.dead_letter is not None:
        for where, spec in (("sink", sink), ("dead_letter", config.dead_letter)):
            if spec.kind == "memory":
                raise ConfigError(
                    f"{where}: a memory sink cannot be used with a dead_letter (use files, "
                    f"console or a format with a batch writer)"
                )
        writer = df.writeStream.foreachBatch(_splitter(sink, config.dead_letter, config.checkpoint))
    elif sink.format == "kafka-eos":  # the query's shape checked before it starts
        from enrich.spark.sink.kafka_eos.query import kafka_eos_writer

        if sink.select:  # the source columns and the value (to_json(...) AS value)
            df = df.selectExpr(*sink.select)
        writer = kafka_eos_writer(df, low_latency=config.latency == "low")
        writer = writer.outputMode(sink.mode or "append").options(**sink.options)
    elif config.latency == "low":  # checked by the config: redis-stream or kafka into redis
        from enrich.spark import low_latency

        writer = low_latency(df).outputMode(sink.mode or "append").options(**sink.options)
    else:
        if sink.select:  # the rows as the sink takes them (Spark's Kafka sink: value...)
            df = df.selectExpr(*sink.select)
        writer = df.writeStream.format(sink.format).outputMode(sink.mode or "append")
        if sink.options:
            writer = writer.options(**sink.options)
        if sink.kind == "memory":
            writer = writer.queryName(sink.name)
    if config.checkpoint:
        writer = writer.option("checkpointLocation", config.checkpoint)
    writer = _trigger(writer, config.trigger, config.source)
    if config.dead_letter is None and sink.path:
        return writer.start(sink.path)
    return writer.start()


def await_query(query: Any, duration: float | None, grace: float = 120.0) -> None:
    """Wait until ``query`` ends; with ``duration``, stop it after that many seconds; on
    SIGTERM or SIGINT, stop it cleanly (:mod:`jobs._stop`).

    The stop waits (up to ``grace`` seconds) for the micro-batch in progress to commit,
    so that its rows are written and the stop interrupts no task (Spark logs an
    interrupted one as an error with a long trace). The query is stopped even if
    waiting fails.

    Returns only when the query stopped without error. Its failure is raised whenever it
    came: at the start, in any micro-batch, in the one still running when ``duration``
    ran out or the signal came (the query then ends failed while this waits for it), or
    in its stop (a ``stop()`` that raises, or a failure Spark recorded as the query
    stopped).
    """
    try:
        with _stop.stop_signals() as request:
            reason, seen = _wait(query, duration, request)
            if reason is not None:
                log.info("%s: stopping the query once its micro-batch in progress ends", reason)
                _let_the_batch_end(query, grace, seen)
    finally:
        if query.isActive:
            query.stop()
    failure = query.exception()
    if failure is not None:
        raise failure


def _wait(query: Any, duration: float | None, request: _stop.StopRequest) -> tuple[str | None, int]:
    """Wait until the query ends (None), ``duration`` runs out or a stop is requested
    (the reason, for the log); with the last batch Spark had reported before that."""
    deadline = None if duration is None else time.monotonic() + duration
    while True:
        seen = _last_batch(query)  # read before the wait: a batch ending in it counts
        left = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
        # pyspark refuses a timeout <= 0, the JVM one under a millisecond
        if query.awaitTermination(max(left, 0.001)):
            return None, seen
        if request.is_requested():
            return str(request.signal_name), seen
        if deadline is not None and time.monotonic() >= deadline:
            return f"--duration {duration:g}s over", seen


def _let_the_batch_end(query: Any, grace: float, seen: int) -> None:
    # Through the JVM: the last batch Spark planned (its offset log) is the one to wait
    # for, until its commit log has it; a batch planned after that is cancelled by the
    # stop. Without the logs (Spark Connect, a test's stand-in): until the trigger is
    # idle or Spark reports a batch after ``seen``.
    deadline = time.monotonic() + grace
    logs = _logs(query)
    target = None if logs is None else _latest(logs[0])
    while query.isActive and time.monotonic() < deadline:
        if logs is not None:
            committed = _latest(logs[1])
            if target is None or (committed is not None and committed >= target):
                return
        elif not query.status.get("isTriggerActive", False) or _last_batch(query) > seen:
            return
        time.sleep(0.05)


def _logs(query: Any) -> tuple[Any, Any] | None:
    """The query's offset and commit logs (JVM objects), or None where there is no JVM
    query to ask (Spark Connect, a test's stand-in) or its internals are renamed."""
    try:
        execution = query._jsq.streamingQuery()
        return execution.offsetLog(), execution.commitLog()
    except Exception:
        return None


def _latest(log: Any) -> int | None:
    latest = log.getLatestBatchId()  # a Scala Option
    return int(latest.get()) if latest.isDefined() else None


def _last_batch(query: Any) -> int:
    last = query.lastProgress
    return -1 if last is None else int(last["batchId"])


def _trigger(writer: Any, trigger: str | None, source: Endpoint | None) -> Any:
    # Files are a finite input unless told otherwise: drain what is there, then stop.
    if trigger is None and source is not None and source.kind == "files":
        trigger = "availableNow"
    if trigger is None:
        return writer
    if trigger == "availableNow":
        return writer.trigger(availableNow=True)
    if trigger == "once":
        return writer.trigger(once=True)
    return writer.trigger(processingTime=trigger)


def write_all(df: Any, config: JobConfig) -> None:
    """Write a batch (not streaming) result to the sink and the dead letter."""
    sink = config.sink or Endpoint(format="console", kind="console")
    if config.dead_letter is None:
        write_batch(df, sink, None)
    else:
        _splitter(sink, config.dead_letter)(df, None)


def _splitter(sink: Endpoint, dead_letter: Endpoint, checkpoint: str | None = None) -> Any:
    from pyspark.sql.functions import col

    from enrich.spark.sink.delta.keying import transaction_id

    # A Delta sink or dead letter is written once per batch id: Delta skips a batch
    # whose id it committed under this transaction id (a replay after a failure).
    sink_txn = transaction_id(checkpoint, "sink")
    dead_txn = transaction_id(checkpoint, DEAD_LETTER)

    def split(batch: Any, batch_id: int | None) -> None:
        # Cached so that the two filters below read one computation: lookups run once.
        batch.persist()
        try:
            good = batch.where(col(ERROR_COLUMN).isNull()).drop(ERROR_COLUMN)
            write_batch(good, sink, batch_id, sink_txn)
            write_batch(batch.where(col(ERROR_COLUMN).isNotNull()), dead_letter, batch_id, dead_txn)
        finally:
            batch.unpersist()

    return split


def write_batch(df: Any, spec: Endpoint, batch_id: int | None, txn: str | None = None) -> None:
    """Write one (non-streaming) DataFrame as ``spec`` says; a Delta write of a
    micro-batch with ``txn`` is keyed by it and the batch id (Delta's idempotent
    writes: a batch id it committed under ``txn`` is not written again)."""
    if spec.kind == "console":
        rows = int(spec.options.get("numRows", "20"))
        truncate = spec.options.get("truncate", "true").lower() == "true"
        label = "" if batch_id is None else f"Batch: {batch_id} "
        print(f"-------------------------------------------\n{label}({spec.kind})")
        df.show(rows, truncate=truncate)
        return
    if spec.kind == "memory":
        df.createOrReplaceTempView(spec.name)
        return
    if spec.select:
        df = df.selectExpr(*spec.select)
    writer = df.write.format(spec.format).mode(spec.mode or "append")
    if spec.options:
        writer = writer.options(**spec.options)
    if spec.format == _delta.FORMAT and txn is not None and batch_id is not None:
        writer = writer.option("txnAppId", txn).option("txnVersion", str(batch_id))
    if spec.path:
        writer.save(spec.path)
    else:
        writer.save()
