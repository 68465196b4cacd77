"""The columnar lookup of ``PostgresLookup``: a batch's rows come back as columns.

Two shapes of answer, decided once per process from the statements' column types
(``Plan``):

* **CSV** (``Plan.csv_sql``), where a unique index holds the key and every field is a
  plain type (``string``, an integer, ``double``, ``boolean``, ``date``) read from a
  column whose values it takes unconverted: the batch statement wrapped into one text,
  ``SELECT string_agg(concat_ws(',', <cells>), E'\\n') FROM (<batch statement>) AS q``,
  text quoted as CSV quotes it (a NULL an empty unquoted cell), read by Arrow's CSV reader
  with the struct's types: no Python object per value at all;
* **arrays** (``Plan.arrow_sql``) otherwise: one row of ``array_agg`` columns, so that
  asyncpg decodes each column as one array (in C, into a list) rather than one
  ``Record`` per row, and each field's list becomes an Arrow array with
  ``pa.array(values, type)``.

Either way the asked keys find their rows with ``pyarrow.compute.index_in`` and one
``take``.

Every key gets exactly what ``lookup_many`` gives it. Where the bulk path cannot promise
that, a batch's columns are decoded row by row by the same :class:`~connectors.sql.RowReader`
instead (with its ``DecodeError`` per key): a key with several rows (1:N), a composite
key, or a column Arrow will not take as the field's type as it is (a ``numeric`` in a
``double`` field, a value out of an ``int`` field's range, a ``map`` or ``struct`` read
from JSON text).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from connectors.sql import RowReader, fit_key
from enrich.spi import ColumnarAnswer, LookupFailed, answer_from_mapping

from . import pool as pools
from .errors import DRIVER_ERRORS, RefusedArgument, translate


def decode(
    keys: pa.Array,
    wanted: list[Any],
    columns: list[list[Any] | None],
    reader: RowReader,
    struct_type: pa.StructType,
) -> ColumnarAnswer:
    """The answer for ``keys`` from one batch's columns (the key column first; None
    columns: no row matched). Falls back to the per-row decoder (module docstring)."""
    if columns[0] is None:  # no row at all: every key a miss
        return ColumnarAnswer(pa.nulls(len(keys), struct_type))
    ids = columns[0]
    try:
        if len(set(ids)) != len(ids):
            raise _Fallback  # a key with several rows (1:N)
        arrays = [
            pa.array(values, type=field.type)
            for values, field in zip(columns[1:], struct_type, strict=True)
        ]
        found = pa.array(ids)
        index = pc.index_in(keys, value_set=found.cast(keys.type))
        structs = pa.StructArray.from_arrays(arrays, fields=list(struct_type))
        return ColumnarAnswer(structs.take(index))
    except (_Fallback, pa.ArrowException, TypeError, ValueError, OverflowError):
        rows = list(zip(*columns, strict=True))
        return answer_from_mapping(wanted, reader.answers(wanted, rows), struct_type)


def decode_csv(
    keys: pa.Array, texts: Sequence[str | None], struct_type: pa.StructType
) -> ColumnarAnswer:
    """The answer for ``keys`` from CSV text answers (``Plan.csv_sql``: one row per key,
    the key first, plain types), read by Arrow's CSV reader: no Python per row."""
    present = [text for text in texts if text]
    if not present:
        return ColumnarAnswer(pa.nulls(len(keys), struct_type))
    # Every line ends with a newline: Arrow reads an empty last cell before the end of
    # the data, unterminated, as an empty value rather than a null (seen with pyarrow 26).
    data = ("\n".join(present) + "\n").encode("utf-8")
    fields = list(struct_type)
    names = ["key", *(f"f{i}" for i in range(len(fields)))]
    types = {"key": keys.type, **{f"f{i}": f.type for i, f in enumerate(fields)}}
    table = pacsv.read_csv(
        pa.BufferReader(data),
        read_options=pacsv.ReadOptions(column_names=names, use_threads=False),
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types=types,
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            null_values=[""],
            true_values=["t", "true"],
            false_values=["f", "false"],
        ),
    )
    columns = [column.combine_chunks() for column in table.columns]
    index = pc.index_in(keys, value_set=columns[0])
    structs = pa.StructArray.from_arrays(columns[1:], fields=fields)
    return ColumnarAnswer(structs.take(index))


def merge(outcomes: Sequence[list[list[Any] | None]]) -> list[list[Any] | None]:
    """The columns of several statements' answers, end to end (None: no rows at all)."""
    if len(outcomes) == 1:
        return outcomes[0]
    merged: list[list[Any] | None] = []
    for columns in zip(*outcomes, strict=True):
        present = [column for column in columns if column is not None]
        merged.append(list(itertools.chain.from_iterable(present)) if present else None)
    return merged


def failed(keys: Sequence[Any], error: LookupFailed, struct_type: pa.StructType) -> ColumnarAnswer:
    """Every key of a batch failed with ``error``."""
    answer = ColumnarAnswer(pa.nulls(len(keys), struct_type))
    answer.errors.update(dict.fromkeys(range(len(keys)), error))
    return answer


def assemble(
    count: int,
    parts: list[tuple[list[int], ColumnarAnswer]],
    refused: dict[int, BaseException],
    struct_type: pa.StructType,
) -> ColumnarAnswer:
    """One answer for ``count`` keys from the answers of batches of their positions,
    the ``refused`` keys failing with their own errors."""
    if len(parts) == 1 and not refused and len(parts[0][0]) == count:
        return parts[0][1]
    order: list[int] = []
    arrays: list[pa.Array] = []
    answer = ColumnarAnswer(pa.nulls(0, struct_type))
    for positions, part in parts:
        order += positions
        arrays.append(part.rows)
        answer.errors.update((positions[i], e) for i, e in part.errors.items())
        answer.multi.update((positions[i], m) for i, m in part.multi.items())
    order += list(refused)
    arrays.append(pa.nulls(len(refused), struct_type))
    answer.errors.update(refused)
    inverse = np.empty(count, dtype=np.int64)
    inverse[np.asarray(order, dtype=np.int64)] = np.arange(count, dtype=np.int64)
    answer.rows = pa.concat_arrays(arrays).take(pa.array(inverse))
    return answer


@dataclass(frozen=True)
class CsvText:
    """A statement's CSV answer (None: no row matched)."""

    text: str | None


class _Fallback(Exception):
    """The batch needs the per-row decoder."""


async def fetch(lookup: Any, keys: pa.Array, struct_type: pa.StructType) -> Any:
    """``PostgresLookup.fetch_arrow``: the statements of ``keys`` now, on the loop; the
    decode step returned (``lookup`` is the source: not imported here, an import circle).

    Raises:
        LookupFailed: every statement of the call failed.
    """
    settings = lookup._settings
    wanted = keys.to_pylist()
    handle = pools.handle_for(settings)
    try:
        plan = await handle.plan(lookup.schema)
    except DRIVER_ERRORS as exc:
        raise translate(exc, settings) from exc
    if not plan.arrow_sql:  # a composite key, or a field Arrow cannot take as it is
        found = await lookup.lookup_many(wanted)
        return lambda: answer_from_mapping(wanted, found, struct_type)
    kinds = plan.kinds
    refused: dict[int, BaseException] = {}
    if kinds == ("int",) and pa.types.is_integer(keys.type):
        fitting = list(range(len(wanted)))
    else:
        fitting = []
        for position, key in enumerate(wanted):
            try:
                fit_key(key, kinds)
                fitting.append(position)
            except TypeError as exc:
                refused[position] = lookup._refused(key, exc)
    size = settings.max_batch
    slices = [fitting[i : i + size] for i in range(0, len(fitting), size)]
    if refused:
        batches = [[wanted[p] for p in positions] for positions in slices]
    else:  # every key fits: the slices of positions are slices of the keys
        batches = [wanted[i : i + size] for i in range(0, len(wanted), size)]

    async def one(batch: list[Any]) -> Any:
        try:
            rows = await lookup._fetch(handle, plan.csv_sql or plan.arrow_sql, batch)
        except LookupFailed as exc:
            return exc
        except RefusedArgument:
            return await lookup._singly(handle, plan.batch_sql, batch)
        return CsvText(rows[0][0]) if plan.csv_sql else list(rows[0])

    outcomes = await asyncio.gather(*(one(batch) for batch in batches))
    failures = [o for o in outcomes if isinstance(o, LookupFailed)]
    if failures and len(failures) == len(outcomes):
        raise failures[0]
    reader = lookup._reader

    def decode_step() -> Any:
        if not refused and all(type(o) is CsvText for o in outcomes):
            return decode_csv(keys, [o.text for o in outcomes], struct_type)
        if not refused and all(type(o) is list for o in outcomes):
            # The common case: every statement answered; one decode for them all.
            return decode(keys, wanted, merge(outcomes), reader, struct_type)
        parts = []
        for positions, batch, outcome in zip(slices, batches, outcomes, strict=True):
            if isinstance(outcome, LookupFailed):
                parts.append((positions, failed(batch, outcome, struct_type)))
            elif isinstance(outcome, dict):
                parts.append((positions, answer_from_mapping(batch, outcome, struct_type)))
            elif isinstance(outcome, CsvText):
                part_keys = keys.take(positions)
                parts.append((positions, decode_csv(part_keys, [outcome.text], struct_type)))
            else:
                part_keys = keys.take(positions)
                parts.append((positions, decode(part_keys, batch, outcome, reader, struct_type)))
        return assemble(len(wanted), parts, refused, struct_type)

    return decode_step
