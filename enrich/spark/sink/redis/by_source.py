"""Exactly once keyed by the source record: the options that turn it on, and the check
of every row before it is staged.

With ``sourceIdColumn`` the transactional sink publishes each source entry at most once,
whatever micro-batch carries it: the commit script keeps, per source stream, the last
entry id published (:mod:`~enrich.spark.sink.redis.two_phase.script`) and applies a row only
when its entry id is after it. A replay whose batches are cut differently (Spark's
async progress tracking re-plans the batches after the last offsets it wrote, so a
batch id may come back with other rows, or rows with another batch id) then neither
loses nor doubles a row. The ``redis-stream`` source gives each row its entry id in the
column ``stream_id`` (and, for a query reading several streams, the stream's key in
``stream_key``): keep those columns through the joins (``lookup_join`` keeps every input
column) and name them::

    .option("sourceIdColumn", "stream_id")      # required for the mode
    .option("sourceStreamColumn", "stream_key")  # when the source reads several streams

The id column is written with the row, as every column is (it is how the commit
script finds a row's source). Rows must come from one source whose entry ids grow
along each stream (a Redis stream's do); a source of several streams without
``sourceStreamColumn`` would compare the ids of one stream with the marks of another,
so :func:`enrich.spark.low_latency` refuses it, and so should you.

**A Kafka source** (Spark's ``kafka`` format) gives each row its ``topic``,
``partition`` and ``offset``: the source stream is the (topic, partition) pair and the
offset, which rises along each partition, is the entry id. Name them so::

    .option("sourceIdColumn", "offset")
    .option("sourceStreamColumn", "topic,partition")

``sourceStreamColumn`` takes several columns, comma-separated: a row's source stream is
their values joined by ``/`` (``orders/2``). An id column may hold an entry id's text
(``<ms>-<seq>``) or a whole number (an offset, compared as the entry id ``<n>-0``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.types import StructType

from .. import sink_spi as spi
from ..sink_spi import ASYNC_OPTION, ID_OPTION, SourceFields

log = logging.getLogger("enrich.spark.sinks")

FROM_OPTION = "publishFrom"


def source_fields(options: Mapping[str, str]) -> SourceFields | None:
    """The columns named by ``sourceIdColumn`` / ``sourceStreamColumn``, or None
    (:func:`enrich.spark.sink.sink_spi.source_fields`; a ``ValueError`` names a bad one)."""
    return spi.source_fields(options, error=ValueError)


def check_mode(
    options: Mapping[str, str], source: SourceFields | None, transactional: bool
) -> bool:
    """Whether the query runs under async progress tracking; refuses what would break
    exactly once there: a sink keyed by batch id (or idempotent appends), and
    ``sourceIdColumn`` outside the transactional mode (only its commit reads it)."""
    if source is not None and not transactional:
        raise ValueError(
            f'option {ID_OPTION} needs mode "transactional": the source marks are kept and '
            'checked by its commit script; mode "idempotent" writes each row directly'
        )
    text = _choice(options, ASYNC_OPTION, ("false", "true"))
    if text == "true" and source is None:
        raise ValueError(
            f"the redis sink cannot keep exactly once under async progress tracking "
            f"({ASYNC_OPTION}=true, which enrich.spark.low_latency turns on) unless it is "
            f"keyed by the source record: after a failure Spark plans again the batches "
            "after the last offsets it wrote, so a batch comes back with another id or "
            "other rows, and a sink keyed by batch id would skip rows never published or "
            f'publish rows twice. Set .option("{ID_OPTION}", "stream_id") with mode '
            '"transactional" (the redis-stream source gives each row its entry id in '
            "stream_id; keep that column), or drop async progress tracking"
        )
    return text == "true"


def publish_from(options: Mapping[str, str], source: SourceFields | None) -> bool:
    """``publishFrom``: ``driver`` (default: tasks stage, the driver's commit publishes)
    or ``tasks`` (each task publishes its rows, the commit settles the marks:
    :mod:`~enrich.spark.sink.redis.two_phase.from_tasks`); True for ``tasks``."""
    text = _choice(options, FROM_OPTION, ("driver", "tasks"))
    if text == "tasks" and source is None:
        raise ValueError(
            f'option {FROM_OPTION}="tasks" needs option {ID_OPTION}: a task publishes its '
            "own rows only where each row's source entry says whether it was published "
            "already (a replayed task would otherwise append its rows again)"
        )
    return text == "tasks"


def start_run(settings: Any) -> str | None:
    """On the driver, before any task of a streaming query keyed by the source record
    (``settings``: its :class:`~enrich.spark.sink.redis.row_writes.SinkSettings`); returns the
    run's name when it publishes from its tasks. (Only such a query can meet spans: a
    sink keyed by batch id asks Redis nothing at the start, so, as before, a wrong
    password fails its first write, not its start.)

    Publishing from the tasks: a plan an earlier run's driver commit left is finished
    first (the tasks do not read plans). Publishing from the driver: spans of published
    rows a run publishing from its tasks left unsettled are refused (the driver's commit
    does not read them, and would publish those rows again)."""
    from ... import redis_options
    from .two_phase import commit, from_tasks, index_key, plan_key

    client = redis_options.connect(settings.url)
    try:
        if not settings.from_tasks:
            left = from_tasks.unsettled(client, settings.identity)
            if left:
                raise ValueError(
                    f"redis sink {settings.target}: an earlier run of this query published "
                    f'from its tasks ({FROM_OPTION}="tasks") and left {left} spans of '
                    "published rows that no commit settled (it stopped mid-batch); "
                    "publishing from the driver does not read them and would publish those "
                    f'rows again. Restart once with .option("{FROM_OPTION}", "tasks") '
                    '(enrich.spark.low_latency(df, publish_from="tasks")) until a batch '
                    "commits, or use a new checkpointLocation"
                )
            return None
        identity = settings.identity
        if client.exists(plan_key(identity)) or client.scard(index_key(identity)):
            done = commit(
                client,
                identity,
                "start",
                [],
                marked=True,
                step=settings.max_rows,
                plan_ttl=settings.staging_ttl,
                source=settings.source,
            )
            log.info(
                "redis sink %s: finished an earlier run's commit before publishing from "
                "the tasks (%d operations published, %d staging lists removed)",
                settings.target,
                done.rows,
                done.cleaned,
            )
    finally:
        client.close()
    return f"r{uuid.uuid4().hex[:16]}"


def _choice(options: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
    """Option ``name``, one of ``allowed`` (the first is the default), any case."""
    text = str(options.get(name, allowed[0])).strip().lower()
    if text not in allowed:
        listed = " or ".join(f'"{a}"' for a in allowed)
        raise ValueError(f"option {name} must be {listed}, got {text!r}")
    return text


def check_writer(source: SourceFields | None, schema: StructType, *, streaming: bool) -> None:
    """On the driver, before any task: a streaming write, and the named columns exist
    and hold text or whole numbers (:func:`enrich.spark.sink.sink_spi.resolve`)."""
    if source is None:
        return
    if not streaming:
        raise ValueError(
            f"option {ID_OPTION} is for streaming queries (writeStream): its marks follow "
            "one query's batches in order, and batch writes (df.write) may run side by "
            "side; drop it for a batch write"
        )
    spi.resolve(source, _fields(schema), sink="redis", error=ValueError)


def checked(items: Iterator[Any], source: SourceFields, schema: StructType) -> Iterator[Any]:
    """``items`` (Arrow batches or rows) as they are, after checking each row's source
    record (:func:`enrich.spark.sink.sink_spi.checked`): a row without fails the task before
    it stages anything of that batch, naming the column and row."""
    columns = spi.resolve(source, _fields(schema), sink="redis", error=ValueError)
    names = [f.name for f in schema.fields]
    return spi.checked(items, columns, names, sink="redis", error=ValueError)


def _fields(schema: StructType) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in schema.fields}
