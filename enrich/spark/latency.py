"""The low-latency profile: one switch for a query from ``redis-stream`` to the ``redis``
sink that cuts what Spark spends between micro-batches, keeping exactly once.

What a micro-batch waits for, on the defaults, besides the work itself: Spark writes the
batch's offsets to the checkpoint before it runs and its commit after (130-370 ms of
every micro-batch here). :func:`low_latency` turns on Spark's async progress tracking
(``asyncProgressTrackingEnabled``), which writes those logs from a thread of their own,
at most once per ``asyncProgressTrackingCheckpointIntervalMs`` (1 s by default), and
starts the next batch at once. The price: after a failure Spark plans again every batch
after the last offsets it wrote, so batches come back re-cut, with other ids or other
rows. The redis sink keyed by batch id would lose or double rows then; keyed by the
source record (``sourceIdColumn``, :mod:`~enrich.spark.sink.by_source`) it publishes
each source entry once whatever batch carries it. So the profile:

- checks that every streaming source of the query is one ``redis-stream`` source (a
  source whose rows carry no entry id could not be keyed), and that the DataFrame keeps
  the source's ``stream_id`` column (and ``stream_key`` when it reads several streams);
- writes to the ``redis`` sink keyed by that column, under async progress tracking
  (with ``_asyncProgressTrackingOverrideSinkSupportCheck``, the internal option Spark
  asks of a sink it does not know: set here only together with the keyed sink, whose
  own check refuses async progress tracking without ``sourceIdColumn``), with a
  processing-time trigger of 0 (the next batch as soon as one ends);
- runs the query's lookup joins (and ``async_map`` calls) inside the sink's write when
  ``df`` is their output (:mod:`~enrich.spark.sink.joined`): one Python stage fewer in
  each task;
- optionally starts the query's Python workers before its first data (:func:`warm_up`).

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

from .sink import joined
from .sink.by_source import ASYNC_OPTION, ID_OPTION, STREAM_OPTION
from .sink.data_source import joined_format
from .sink.layout import STREAMS_OPTION

SOURCE_FORMAT = "redis-stream"
ID_COLUMN = "stream_id"  # what the redis-stream source names them (its fields module)
KEY_COLUMN = "stream_key"
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
    source_id: str = ID_COLUMN,
    source_stream: str | None = None,
    warm: bool = True,
    join_in_sink: bool = True,
) -> Any:
    """``df.writeStream.format("redis")`` with the low-latency profile (see the module
    docstring): add the sink's options (``url``, ``stream`` or ``key``,
    ``checkpointLocation``...) and ``start()`` as usual::

        query = (low_latency(enriched)
                 .option("url", url).option("stream", "enriched")
                 .option("checkpointLocation", "/chk/enriched")
                 .start())

    Args:
        df: a streaming DataFrame read from one ``redis-stream`` source.
        source_id: the column holding each row's source entry id (the source's
            ``stream_id``, kept through the joins).
        source_stream: the column holding the source stream's key; needed when the
            source reads several streams (default: ``stream_key`` then, if present).
        warm: start the query's Python workers now (:func:`warm_up`), so that its first
            micro-batch does not wait for them.
        join_in_sink: when ``df`` is what ``lookup_join`` or ``async_map`` returned (or
            a chain of them), let the sink run them in its own Python worker
            (:mod:`~enrich.spark.sink.joined`): one Python stage a task fewer. False:
            the joins run in their own stage, as without the profile.

    Raises:
        ProfileRefused: the query is not streaming, reads another source (or several),
            or its rows do not carry their source entry (the message says which).
    """
    if not df.isStreaming:
        raise ProfileRefused(
            "the low-latency profile is for streaming queries (spark.readStream); "
            "a batch write has no micro-batches to cut"
        )
    sources = streaming_sources(df)
    foreign = [name for name, _ in sources if name != SOURCE_FORMAT]
    if foreign or len(sources) != 1:
        found = ", ".join(name for name, _ in sources) or "none found"
        raise ProfileRefused(
            f"the low-latency profile needs one redis-stream source (found: {found}): "
            "under async progress tracking a failure re-cuts the batches, and only a "
            "source whose rows carry their entry id lets the redis sink publish each "
            "record once whatever batch carries it"
        )
    streams = [s for s in (sources[0][1] or "").split(",") if s.strip()]
    columns = list(df.columns)
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
    if warm:
        warm_up(df.sparkSession)
    join = joined.of(df) if join_in_sink else None
    if join is None:
        writer = df.writeStream.format("redis")
    else:
        writer = join.input.writeStream.format(joined_format(df.sparkSession, join))
    writer = writer.option(ID_OPTION, source_id)
    if streams:  # the sink carries its marks over a change of them (sink.layout)
        writer = writer.option(STREAMS_OPTION, ",".join(s.strip() for s in streams))
    if source_stream is not None:
        writer = writer.option(STREAM_OPTION, source_stream)
    writer = writer.option(ASYNC_OPTION, "true").option(OVERRIDE, "true")
    return writer.trigger(processingTime=TRIGGER)


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
    import enrich.spark.join.batches
    import enrich.spark.sink.data_source
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
