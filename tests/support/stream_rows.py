"""What a ``redis-stream`` reader's ``read()`` yields, as row tuples."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa


def rows_of(items: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
    """Rows of the record batches (or the rows) a reader yields, in order."""
    for item in items:
        if isinstance(item, pa.RecordBatch):
            yield from zip(*(column.to_pylist() for column in item.columns), strict=True)
        else:
            yield tuple(item)
