"""The low-latency profile: one switch for a query from ``redis-stream`` (or Spark's
``kafka`` source) to the ``redis`` sink that cuts what Spark spends between
micro-batches, keeping exactly once.

What a micro-batch waits for, on the defaults, besides the work itself: Spark writes the
batch's offsets to the checkpoint before it runs and its commit after (130-370 ms of
every micro-batch here). :func:`low_latency` turns on Spark's async progress tracking
(``asyncProgressTrackingEnabled``), which writes those logs from a thread of their own,
at most once per ``asyncProgressTrackingCheckpointIntervalMs`` (1 s by default), and
starts the next batch at once. The price: after a failure Spark plans again every batch
after the last offsets it wrote, so batches come back re-cut, with other ids or other
rows. The redis sink keyed by batch id would lose or double rows then; keyed by the
source record (``sourceIdColumn``, :mod:`~enrich.spark.sink.redis.by_source`) it publishes
each source entry once whatever batch carries it. So the profile:

- checks that every streaming source of the query is one ``redis-stream`` source or one
  ``kafka`` source (a source whose rows carry no entry id could not be keyed), and that
  the DataFrame keeps the source's ``stream_id`` column (and ``stream_key`` when it
  reads several streams), or, from Kafka, its ``topic``, ``partition`` and ``offset``
  columns: a Kafka record is keyed by (topic, partition), its offset the rising id;
- writes to the ``redis`` sink keyed by that column, under async progress tracking
  (with ``_asyncProgressTrackingOverrideSinkSupportCheck``, the internal option Spark
  asks of a sink it does not know: set here only together with the keyed sink, whose
  own check refuses async progress tracking without ``sourceIdColumn``), with a
  processing-time trigger of 0 (the next batch as soon as one ends);
- runs the query's lookup joins (and ``async_map`` calls) inside the sink's write when
  ``df`` is their output (their stages, :mod:`~enrich.spark.stages.pipeline`, run by
  the sink: :mod:`~enrich.spark.sink.joined`): one Python stage fewer in each task;
- optionally starts the query's Python workers before its first data (:func:`warm_up`).

With ``sink="kafka"`` the profile writes to the ``kafka-alo`` sink instead
(:mod:`~enrich.spark.sink.kafka`: Kafka at least once, as Spark's own Kafka sink, which
Spark allows under async progress tracking): the joins run in its write too, and since
an at-least-once sink keys nothing by the source record, the source checks above do not
apply.

What it trades: a restart replays up to ``asyncProgressTrackingCheckpointIntervalMs`` of
batches (the sink skips what it published), the checkpoint lags the sink by as much,
stateful operators are refused by Spark, and ``availableNow``/``once`` triggers are not
allowed (Spark's rules for async progress tracking).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)

from ..sink.delta.keying import DELTA_REFUSED
from ..sink.joined import JoinableSink, register_joined
from ..sink.redis.by_source import FROM_OPTION
from ..sink.redis.two_phase.layout import STREAMS_OPTION
from ..sink.sink_spi import (
    ASYNC_OPTION,
    ID_OPTION,
    KAFKA_ID,
    KAFKA_PARTITION as KAFKA_STREAM,
    STREAM_ID as ID_COLUMN,
    STREAM_KEY as KEY_COLUMN,
    STREAM_OPTION,
)
from ..stages.pipeline import stage_of

SOURCE_FORMAT = "redis-stream"
KAFKA_FORMAT = "kafka"
OVERRIDE = "_asyncProgressTrackingOverrideSinkSupportCheck"
WARM_BATCHES = 1  # micro-batches of the warm-up query (3 measured no better)
WARM_ROWS = 1000  # rows a task of each
TRIGGER = "0 seconds"


class ProfileRefused(ValueError):
    """The low-latency profile would break exactly once for this query (the message
    names the reason and what to change)."""


def low_latency(
    df: Any,
    *,
    source_id: str | None = None,
    source_stream: str | None = None,
    warm: bool = True,
    join_in_sink: bool = True,
    sink: str | type[JoinableSink] = "redis",
    publish_from: str = "driver",
) -> Any:
    """``df.writeStream.format("redis")`` with the low-latency profile (see the module
    docstring): add the sink's options (``url``, ``stream`` or ``key``,
    ``checkpointLocation``...) and ``start()`` as usual::

        query = (low_latency(enriched)
                 .option("url", url).option("stream", "enriched")
                 .option("checkpointLocation", "/chk/enriched")
                 .start())

    Args:
        df: a streaming DataFrame read from one ``redis-stream`` source, or from one
            ``kafka`` source (Spark's connector).
        source_id: the column holding each row's source entry id (default: the
            source's ``stream_id``, or a kafka source's ``offset``, kept through the
            joins).
        source_stream: the column holding the source stream's key; needed when the
            source reads several streams (default: ``stream_key`` then, if present).
            From kafka: ``"topic,partition"`` (the default), the columns naming the
            partition a record's offset counts in.
        warm: start the query's Python workers now (:func:`warm_up`), so that its first
            micro-batch does not wait for them.
        join_in_sink: when ``df`` is what ``lookup_join`` or ``async_map`` returned (or
            a chain of them), let the sink run them in its own Python worker
            (:mod:`~enrich.spark.stages.pipeline`): one Python stage a task fewer. False:
            the joins run in their own stage, as without the profile.
        sink: ``"redis"``, or ``"kafka"``: Kafka at least once, Spark's Kafka sink's
            options and row conventions (``kafka.bootstrap.servers``, ``topic``; the
            rows' ``key``, ``value``, ``topic``, ``partition``, ``headers``), the joins
            run in its write (:mod:`~enrich.spark.sink.kafka`; no source record to
            keep, so none of the checks above but streaming), or ``"kafka-eos"``:
            Kafka exactly once, keyed by the source record too
            (:func:`enrich.spark.sink.kafka_eos.kafka_eos_writer`, whose checks
            replace the ones above; Kafka or redis-stream sources; the joins stay in
            their stage). ``"delta"`` is refused (:data:`DELTA_REFUSED` says why). Or a
            sink of one's own written on the SPI (a
            :class:`~enrich.spark.sink.joined.JoinableSink` class keyed by the source
            record: docs/writing-a-sink.md), given the same options and checks as the
            redis sink but ``publishFrom`` and ``sourceStreams``, the joins run in it.
        publish_from: the redis sink's ``publishFrom``: ``"driver"`` (tasks stage,
            the driver's commit publishes) or ``"tasks"`` (each task publishes its rows
            and the commit only raises the marks:
            :mod:`~enrich.spark.sink.redis.two_phase.from_tasks`; needs each task's rows in the
            source's order). Measured no faster at 10,000 entries/s nor over a backlog
            (docs/latency.md), so not the default.

    Raises:
        ProfileRefused: the query is not streaming, reads another source (or several),
            or its rows do not carry their source entry, or the sink is Delta's (the
            message says which).
    """
    if sink == "kafka-eos":
        from ..sink.kafka_eos.query import kafka_eos_writer

        writer = kafka_eos_writer(df, low_latency=True)  # refuses what it cannot keep
        if warm:
            warm_up(df.sparkSession)
        return writer
    if sink == "delta":
        raise ProfileRefused(DELTA_REFUSED)
    if publish_from not in ("tasks", "driver"):
        raise ProfileRefused(f'publish_from must be "tasks" or "driver", got {publish_from!r}')
    own = isinstance(sink, type) and issubclass(sink, JoinableSink)
    if sink not in ("redis", "kafka") and not own:
        raise ProfileRefused(
            f'the low-latency profile writes to "redis", "kafka" or "kafka-eos", not {sink!r}'
        )
    if not df.isStreaming:
        raise ProfileRefused(
            "the low-latency profile is for streaming queries (spark.readStream); "
            "a batch write has no micro-batches to cut"
        )
    if sink == "kafka":  # at least once: nothing to key by the source record
        from ..sink.kafka.alo_sink import KafkaAloSink

        if warm:
            warm_up(df.sparkSession)
        writer = _joined_writer(df, KafkaAloSink, join_in_sink)
        writer = writer.option(ASYNC_OPTION, "true").option(OVERRIDE, "true")
        return writer.trigger(processingTime=TRIGGER)
    sources = streaming_sources(df)
    known = (SOURCE_FORMAT, KAFKA_FORMAT)
    if len(sources) != 1 or sources[0][0] not in known:
        found = ", ".join(name for name, _ in sources) or "none found"
        raise ProfileRefused(
            f"the low-latency profile needs one redis-stream source or one kafka source "
            f"(found: {found}): under async progress tracking a failure re-cuts the "
            "batches, and only a source whose rows carry their entry id (a stream entry "
            "id; a Kafka topic, partition and offset) lets the redis sink publish each "
            "record once whatever batch carries it"
        )
    columns = list(df.columns)
    streams: list[str] = []  # a redis-stream source's streams, by name
    if sources[0][0] == KAFKA_FORMAT:
        source_id, source_stream = _kafka_columns(columns, source_id, source_stream)
    else:
        streams = [s.strip() for s in (sources[0][1] or "").split(",") if s.strip()]
        source_id, source_stream = _stream_columns(
            columns, sources[0][1], source_id or ID_COLUMN, source_stream
        )
    if warm:
        warm_up(df.sparkSession)
    if isinstance(sink, type):
        target = sink
    else:
        from ..sink.redis.data_source import RedisSinkDataSource as target
    writer = _joined_writer(df, target, join_in_sink, register=own)
    writer = writer.option(ID_OPTION, source_id)
    if source_stream is not None:
        writer = writer.option(STREAM_OPTION, source_stream)
    if not own:  # the redis sink's own options
        if streams:  # it carries its marks over a change of them (two_phase.layout)
            writer = writer.option(STREAMS_OPTION, ",".join(streams))
        writer = writer.option(FROM_OPTION, publish_from)
    writer = writer.option(ASYNC_OPTION, "true").option(OVERRIDE, "true")
    return writer.trigger(processingTime=TRIGGER)


def _joined_writer(
    df: Any, sink: type[JoinableSink], join_in_sink: bool, *, register: bool = True
) -> Any:
    """``df``'s writer to ``sink`` (registered here unless ``register`` is False: the
    redis sink, which :func:`~enrich.spark.register_data_sources` registered): with
    ``join_in_sink`` and ``df`` a stage's output, the stage's input written to the sink
    running the stage."""
    stage = stage_of(df) if join_in_sink else None
    if stage is None:
        if register:
            df.sparkSession.dataSource.register(sink)
        return df.writeStream.format(sink.name())
    return stage.input.writeStream.format(register_joined(df.sparkSession, sink, stage))


def _stream_columns(
    columns: list[str], streams_option: str | None, source_id: str, source_stream: str | None
) -> tuple[str, str | None]:
    """A redis-stream source's id and stream columns, checked in ``columns``."""
    streams = [s for s in (streams_option or "").split(",") if s.strip()]
    if source_id not in columns:
        raise ProfileRefused(
            f"the low-latency profile needs each row's source entry id: the DataFrame has "
            f"no column {source_id!r} (columns: {', '.join(columns)}). Name stream_id in "
            "the redis-stream source's schema and keep it through the query (do not "
            "drop it), or pass source_id= the column that holds it"
        )
    if source_stream is None and len(streams) > 1:
        if KEY_COLUMN not in columns:
            raise ProfileRefused(
                f"the source reads {len(streams)} streams ({', '.join(streams)}): each "
                "has its own entry ids, so rows must also carry their stream. Name "
                f"{KEY_COLUMN} in the source's schema and keep it, or pass source_stream="
            )
        source_stream = KEY_COLUMN
    if source_stream is not None and source_stream not in columns:
        raise ProfileRefused(
            f"source_stream names column {source_stream!r}, which the DataFrame does not "
            f"have (columns: {', '.join(columns)})"
        )
    return source_id, source_stream


def _kafka_columns(
    columns: list[str], source_id: str | None, source_stream: str | None
) -> tuple[str, str]:
    """A kafka source's offset and (topic, partition) columns, checked in ``columns``:
    a record is published once by its partition's offset, so all three must be kept
    (a topic's partitions count their offsets apart; one subscription may read several
    topics)."""
    offset = source_id or KAFKA_ID
    stream = [c.strip() for c in (source_stream or ",".join(KAFKA_STREAM)).split(",")]
    missing = [c for c in (offset, *stream) if c not in columns]
    if missing:
        raise ProfileRefused(
            f"the low-latency profile keys each Kafka record by its topic, partition and "
            f"offset: the DataFrame has no column {', '.join(map(repr, missing))} "
            f"(columns: {', '.join(columns)}). Keep the kafka source's topic, partition "
            "and offset columns through the query (select them with the value you "
            "parse), or pass source_id= / source_stream= the columns that hold them"
        )
    return offset, ",".join(stream)


def streaming_sources(df: Any) -> list[tuple[str, str | None]]:
    """The streaming sources of ``df``'s plan: each one's format name and its ``stream``
    option (None where it has none); a classic session's plan only.

    Raises:
        ProfileRefused: the plan cannot be read (Spark Connect).
    """
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        raise ProfileRefused(
            "the low-latency profile checks the query's sources in its plan, which a "
            "Spark Connect DataFrame does not expose: use a classic session (or set the "
            "sink's options and async progress tracking yourself, as docs/latency.md shows)"
        )
    found: list[tuple[str, str | None]] = []
    leaves = jdf.queryExecution().analyzed().collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        if not leaf.isStreaming():
            continue
        try:
            name = str(leaf.sourceName())
        except Exception:  # a streaming leaf of another kind: named by its class
            name = str(leaf.getClass().getSimpleName())
        try:
            stream = leaf.extraOptions().get("stream")
        except Exception:
            stream = None
        found.append((name, None if stream is None else str(stream)))
    return found


def warm_up(spark: Any, tasks: int | None = None) -> float:
    """Start the Python processes a streaming query's first micro-batch would wait for,
    with the modules they import loaded, by running a tiny streaming query of the same
    shape: a Python source read by ``tasks`` tasks (default: the session's parallelism),
    a ``mapInArrow`` stage, a Python Arrow stream writer and its driver-side commit. The
    executors' workers and the driver's writer and commit processes it leaves idle are
    the ones the next query reuses (Spark keeps an idle worker 60 s). Returns the
    seconds it took."""
    started = time.perf_counter()
    n = tasks or int(spark.sparkContext.defaultParallelism)
    spark.dataSource.register(_WarmUp)
    with tempfile.TemporaryDirectory(prefix="enrich-warm-up-") as checkpoint:
        df = spark.readStream.format(_WarmUp.name()).option("tasks", n).load()
        query = (
            df.mapInArrow(_load, "id long")
            .writeStream.format(_WarmUp.name())
            .option("checkpointLocation", checkpoint)
            .start()
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    return time.perf_counter() - started


def _modules() -> None:
    """What the real query's Python processes import: pyarrow, redis, the source's
    reader, the join's worker side, the sink's writer and commit."""
    import enrich.spark.join.join_batches
    import enrich.spark.sink.joined
    import enrich.spark.sink.kafka.alo_sink
    import enrich.spark.sink.redis.data_source
    import enrich.spark.streams.read  # noqa: F401


def _load(batches: Iterator[Any]) -> Iterator[Any]:
    _modules()
    yield from batches


class _WarmUp(DataSource):
    """A source of one row per task and a sink that keeps nothing (see :func:`warm_up`)."""

    @classmethod
    def name(cls) -> str:
        return "enrich-warm-up"

    def schema(self) -> str:
        return "id long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _WarmReader(int(self.options.get("tasks", 1)))

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        _modules()
        return _WarmWriter()


class _WarmReader(DataSourceStreamReader):
    """``WARM_BATCHES`` micro-batches of ``WARM_ROWS`` rows a task: the first starts the
    processes, the next ones run the JVM's and Python's paths warm."""

    def __init__(self, tasks: int) -> None:
        self.tasks = tasks
        self.planned = 0

    def initialOffset(self) -> dict[str, int]:
        return {"n": 0}

    def latestOffset(self, start: Any = None, limit: Any = None) -> dict[str, int]:
        self.planned = min(self.planned + 1, WARM_BATCHES)
        return {"n": self.planned}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.tasks if end["n"] > start["n"] else 0)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        _modules()
        import pyarrow as pa

        yield pa.RecordBatch.from_pydict({"id": list(range(WARM_ROWS))})

    def commit(self, end: dict[str, int]) -> None:
        pass


class _WarmWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        _modules()
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[Any], batchId: int) -> None:
        _modules()

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass
