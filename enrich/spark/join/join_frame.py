"""``lookup_join``: a lookup join on a DataFrame, checked on the driver, run by
``mapInArrow`` on the workers (:mod:`.join_batches`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql.types import StringType, StructField, StructType

from ...lookup.join_settings import DEFAULT_MAX_BATCH, JoinSettings, default_capacity
from ..spark_types import spark_type
from ..stages.operator_settings import LOOKUP_JOIN, Face, OperatorSettings

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ...lookup.cache.full import FullCache
    from ...lookup.cache.lookup_cache import LookupCache
    from ...lookup.contract.lookup_source import LookupSource
    from ..stages.arrow_stage import ArrowFunction
    from ..stages.operator_settings import JoinKnobs
    from .join_batches import JoinPlan


def lookup_join(
    df: DataFrame,
    source: LookupSource,
    *,
    on: str | Sequence[str],
    how: str = "left",
    cache: LookupCache | FullCache | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    prefix: str = "",
    name: str | None = None,
    observe: bool | None = None,
    shuffle: bool | int = False,
    settings: OperatorSettings | None = None,
    **knobs: Unpack[JoinKnobs],
) -> DataFrame:
    """Join every row of ``df`` with the rows its key finds in ``source``.

    Works on batch and streaming DataFrames alike, and joins can be chained.

    Args:
        df: the input; every column is kept.
        source: the dimension store (e.g. ``RedisLookup``, ``HttpLookup``); it is pickled
            to the executors.
        on: the key column, or several for a composite key (a tuple key). A key column
            is a string, an integral type (tinyint to bigint) or binary; any other type
            (double, decimal, boolean, timestamp, date, array, ...) is refused here,
            before any job runs. A row whose key (or any part of it) is null finds
            nothing.
        how: "left" keeps rows that find nothing (null dimension columns); "inner" drops
            them.
        settings: the operator's knobs in one object
            (:class:`~enrich.spark.OperatorSettings`: mode, capacity, timeout, retry,
            on_error, error_column); each knob is also a keyword argument, which goes on
            top of ``settings``:
        mode: ``OutputMode.ORDERED`` / "ordered" keeps the rows' order within each
            partition; "unordered" emits rows as their lookups complete.
        capacity: rows in flight per task at most: rows admitted and not yet handed
            back to Spark (backpressure beyond that). It bounds the task's memory and
            how many requests overlap. Rows go in chunks of the input's Arrow batches,
            cut to at most ``capacity // 4`` rows. The default is the source's own
            ``preferred_capacity`` when it has one (``PostgresLookup``,
            ``MySqlLookup``: four statements per pool connection, what the pool answers
            well within the timeout on a busy machine), else 131072 (chunks of whole
            10,000-row batches, about thirteen in flight: the fastest setting measured
            on Redis).
        timeout: seconds per row, retries included (None: no timeout).
        retry: a retry strategy (``FixedDelayRetry``, ``ExponentialBackoffRetry``), or None.
        cache: a per-process :class:`~enrich.LookupCache` (partial: LRU and TTL), a
            :class:`~enrich.FullCache` (the whole dimension per executor process,
            reloaded on a schedule; keys absent from it are misses, asked nothing), or
            None.
        on_error: what a row whose lookup failed becomes: "fail" (the task fails),
            "null" (null dimension columns), "drop" (no row), "error_column" (null
            dimension columns and the reason in ``error_column``).
        max_batch: keys per request at most (one ``lookup_many`` call, one MGET, one
            batch POST): a chunk's distinct keys go out in requests of this size,
            concurrently (a RedisLookup pipelines its MGETs of its own ``max_batch``).
            It bounds a request, not the rows in flight.
        prefix: put before each dimension column's name.
        error_column: the reason column's name (``on_error="error_column"`` only).
        name: the join's name for metrics (default ``"lookup_<n>"``, see
            :func:`join_names`); joins sharing a name add up their metrics.
        observe: carry the join's metrics through ``DataFrame.observe`` under
            ``enrich.<name>`` (see Metrics below); None (the default): on for a streaming
            ``df`` under Spark Connect, off otherwise (accumulators carry them).
        shuffle: key affinity (Flink's ``LOOKUP('shuffle' = 'true')``): route the rows by
            their key first (``df.repartition(n, *on)``), so that all rows of a key are
            looked up by one task (and within a job by one executor). True: into
            ``spark.sql.shuffle.partitions`` partitions; an int: into that many. It
            costs a shuffle (see docs/spark.md for when it pays, and what "ordered"
            means after it).

    Returns:
        ``df``'s columns followed by the schema's fields (named ``prefix + field``, with
        the schema's types), plus ``error_column`` (string) under "error_column". A key
        with several rows (1:N) yields one output row per dimension row.

    Raises:
        ValueError: an ``on`` column is missing (the message lists the available
            columns) or of a type no key may have (the message names the column, its
            type and the cast that fixes it), output names collide (named in the
            message; use ``prefix``), or a setting is invalid (named with its value).

    Metrics: each task adds its join's :class:`~enrich.JoinMetrics` to an accumulator
    when it ends; read them with :func:`statistics` or log them per micro-batch with
    :class:`EnrichMetricsListener`. Under Spark Connect, which has no accumulators, each
    micro-batch's progress of a streaming join carries them instead
    (``observedMetrics["enrich.<name>"]``, through ``DataFrame.observe``; read with
    :func:`observed_statistics`, logged by the listener); ``observe=True`` does the same
    on classic Spark.
    """
    from ..metrics.stage_labels import describe, store_of
    from ..stages.pipeline import add_operator_stage
    from .join_batches import enrich_batches

    own = {"on": on, "how": how, "cache": cache, "max_batch": max_batch, "prefix": prefix}
    shape = join_shape(LOOKUP_JOIN, df.schema, source, settings, knobs, **own)
    df = route_by_key(df, [df.columns[i] for i in shape.on], shuffle)
    name = join_name(name)
    describe(name, store=store_of(source), capacity=shape.settings.capacity)

    def function(accumulator: Any, observed: bool) -> ArrowFunction:
        return partial(enrich_batches, shape.plan(name, accumulator, observed=observed))

    return add_operator_stage(df, shape.fields, name=name, observe=observe, function=function)


@dataclass(frozen=True)
class JoinShape:
    """A join over an input schema, checked on the driver.

    Attributes:
        source: the dimension store.
        settings: the join's settings.
        on: the key columns' positions in the input.
        columns: the dimension columns it adds (prefix included).
        fields: the fields it adds (the error column last).
    """

    source: LookupSource
    settings: JoinSettings
    on: tuple[int, ...]
    columns: tuple[str, ...]
    fields: tuple[StructField, ...]

    def plan(self, name: str, accumulator: Any, *, observed: bool = False) -> JoinPlan:
        """What the workers run, its metrics under ``name`` into ``accumulator``."""
        from .join_batches import JoinPlan

        return JoinPlan(
            name=name,
            source=self.source,
            on=self.on,
            columns=self.columns,
            settings=self.settings,
            accumulator=accumulator,
            observed=observed,
        )


def join_shape(
    face: Face,
    schema: StructType,
    source: Any,
    settings: OperatorSettings | None,
    knobs: Mapping[str, Any],
    **join: Any,
) -> JoinShape:
    """A join of ``source`` over ``schema``, every setting and column checked (see
    :func:`join_settings` and :func:`join_columns`)."""
    checked = join_settings(face, source, settings, knobs, **join)
    positions, columns, fields = join_columns(schema, source, checked, join.get("on"))
    return JoinShape(source, checked, positions, columns, tuple(fields))


def join_settings(
    face: Face,
    source: Any,
    settings: OperatorSettings | None,
    knobs: Mapping[str, Any],
    **join: Any,
) -> JoinSettings:
    """What every lookup face checks first: ``source`` is a lookup source, and the
    join's settings (``face``'s knobs from ``settings`` and ``knobs``, with the join's
    own ``join``); a capacity not set is the source's (:func:`default_capacity`).

    Raises:
        ValueError: ``source`` is not a LookupSource, or a setting is invalid (named
            with its value).
        TypeError: a keyword argument the face does not take.
    """
    from ...lookup.contract.lookup_source import LookupSource

    if not isinstance(source, LookupSource):
        raise ValueError(
            f"source must be a LookupSource (schema, lookup_many, aclose), got {source!r}"
        )
    capacity = default_capacity(source, join.get("cache"))
    return JoinSettings(knobs=face.settings(settings, knobs, capacity=capacity), **join)


def route_by_key(df: DataFrame, columns: Sequence[str], shuffle: bool | int) -> DataFrame:
    """``df`` hash-partitioned by ``columns`` (``shuffle`` True: into
    ``spark.sql.shuffle.partitions`` partitions; an int: into that many), or ``df``
    itself when ``shuffle`` is False."""
    if shuffle is False:
        return df
    if shuffle is True:
        return df.repartition(*[df[c] for c in columns])
    if isinstance(shuffle, bool) or not isinstance(shuffle, int) or shuffle < 1:
        raise ValueError(f"shuffle must be True, False or a partition count >= 1, got {shuffle!r}")
    return df.repartition(shuffle, *[df[c] for c in columns])


def join_name(name: str | None, prefix: str = "lookup") -> str:
    """``name`` checked, or a fresh default (``lookup_<n>``, ``<prefix>_<n>``)."""
    from ..metrics.accumulator import new_name

    if name is None:
        return new_name(prefix)
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string or None, got {name!r}")
    return name


def _key_positions(columns: Sequence[str], wanted: Sequence[str], on: Any) -> tuple[int, ...]:
    """Where the key columns are; a missing one is an error listing what exists."""
    if not wanted:
        raise ValueError(f"on must be a column name or a list of them, got {on!r}")
    positions: list[int] = []
    missing: list[str] = []
    for column in wanted:
        exact = [i for i, c in enumerate(columns) if c == column]
        loose = [i for i, c in enumerate(columns) if c.lower() == column.lower()]
        found = exact or loose
        if len(found) == 1:
            positions.append(found[0])
        elif found:
            raise ValueError(f"on column {column!r} is ambiguous: {[columns[i] for i in found]}")
        else:
            missing.append(column)
    if missing:
        raise ValueError(
            f"lookup_join: the DataFrame has no column {', '.join(map(repr, missing))} "
            f"(on={on!r}); available columns: {', '.join(columns)}"
        )
    return tuple(positions)


def join_columns(
    schema: StructType, source: LookupSource, settings: JoinSettings, on: Any
) -> tuple[tuple[int, ...], tuple[str, ...], list[StructField]]:
    """What a join over input ``schema`` adds, checked: the key columns' positions, the
    dimension's output column names, and the fields they add (the error column last).

    Raises:
        ValueError: a key column is missing or of a type keys cannot have, or an added
            column's name is already taken (the message names it).
    """
    from .key_columns import check_key_columns

    positions = _key_positions(schema.names, settings.on, on)
    check_key_columns(schema, positions)
    columns = tuple(settings.prefix + f for f in source.schema.names)
    added = [*columns, settings.error_column] if settings.with_error else list(columns)
    check_collisions(schema.names, added)
    fields = [
        StructField(column, spark_type(f.type), nullable=True)
        for column, f in zip(columns, source.schema.fields, strict=True)
    ]
    if settings.with_error:
        fields.append(StructField(settings.error_column, StringType(), nullable=True))
    return positions, columns, fields


def check_collisions(
    existing: Sequence[str],
    added: Sequence[str],
    *,
    what: str = "lookup_join",
    fix: str = "set prefix= (e.g. prefix='dim_')",
) -> None:
    """Raise ``ValueError`` naming the ``added`` columns ``existing`` already has.

    Spark resolves names case-insensitively by default: "Name" and "name" collide.
    """
    taken = {c.lower() for c in existing}
    clash = [c for c in added if c.lower() in taken]
    if clash:
        raise ValueError(
            f"{what}: columns {clash} would be added but the DataFrame already has "
            f"them; {fix} or rename the input columns"
        )
