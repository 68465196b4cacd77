"""The columnar lookup of a batch-mode HttpLookup: the POSTs of ``lookup_many``, answers
decoded in bulk into the dimension's Arrow struct.

The keys go out exactly as ``lookup_many`` sends them (chunks of ``max_batch``, one
POST each, concurrently, with the same limits, bounds, errors and masking:
:class:`connectors.http.batch.Batches`). Each answer object is parsed whole by the
schema's JSON parser (orjson, C level); each key's document is looked up by its
:func:`~connectors.http.batch.batch_key` (``str(key)``), and the ``dict`` documents
become the struct's columns at once (:func:`enrich.spi.decode_documents`). The
per-value decoder of ``lookup_many`` (:meth:`HttpLookup._rows`) takes everything the
bulk step cannot take exactly, so every key gets the same outcome and the same
``DecodeError`` text:

* documents that are not an object: arrays (1:N joins), numbers, text; a ``path`` that
  meets a non-object on its way;
* documents with a field value the bulk conversion would read differently (a float in
  an integer field, text in a number field, a nested value...), and all the documents
  when ``pyarrow.array`` refuses a column (an integer out of the field's range);
* a null ``NOT NULL`` field, a field type outside ``BULK_TYPES``, and every document
  of a source with ``fields`` paths (the per-value decoder follows them).

A POST that fails, or an answer that is not a JSON object, is the error of its chunk's
keys; when every chunk failed, the call raises the first chunk's error, as
``lookup_many`` does (``fetch_arrow``: when the requests or the decode step find it).
Arrow's JSON reader, which the Redis lookup uses, is not used here: its fixed cost of
~0.1-0.4 ms per call is more than the whole bulk step for a call's few hundred keys, and
the answer would have to be parsed and written out again to feed it one object a line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa

from enrich.spi import (
    ColumnarAnswer,
    Decode,
    DecodeError,
    Schema,
    answer_from_mapping,
    decode_documents,
)

from . import body
from .batch import Batches, first_failure
from .pool import Pool
from .settings import Settings


@dataclass(frozen=True)
class BatchDecoding:
    """What a batch-mode source fixed on construction that its columnar lookup needs:
    its POSTs, its per-value decoder (a document to ``lookup_many``'s value, or
    ``DecodeError``), its schema and settings (``path``, ``fields``)."""

    batches: Batches
    rows: Callable[[Any], Any]
    schema: Schema
    settings: Settings


async def fetch_arrow(
    decoding: BatchDecoding, pool: Pool, keys: pa.Array, struct_type: pa.StructType
) -> Decode:
    """A batch-mode source's ``fetch_arrow``: the POSTs of its ``lookup_arrow`` on
    ``pool``, made now, and their decoding, returned as a step to run later on any
    thread (it reads only the answers' bodies and ``decoding``).

    Raises:
        LookupFailed: every POST failed (the first chunk's error).
    """
    batches = decoding.batches
    listed = keys.to_pylist()
    chunks = batches.chunks(listed)
    replies = await asyncio.gather(*(batches.post(pool, chunk) for chunk in chunks))
    failed = first_failure(replies)
    if failed is not None:
        raise failed
    sizes = [len(chunk) for chunk in chunks]
    return partial(_decoded, decoding, listed, sizes, replies, struct_type)


def _decoded(
    decoding: BatchDecoding,
    keys: list[Any],
    sizes: list[int],
    replies: Sequence[bytes | Exception],
    struct_type: pa.StructType,
) -> ColumnarAnswer:
    """The answer for ``keys`` from their chunks' ``replies`` (bodies or errors)."""
    batches = decoding.batches
    answers = [
        reply if isinstance(reply, Exception) else batches.parse(reply, size)
        for reply, size in zip(replies, sizes, strict=True)
    ]
    failed = first_failure(answers)
    if failed is not None:
        raise failed
    documents: list[Any] = []
    errors: dict[int, BaseException] = {}
    start = 0
    for answer, size in zip(answers, sizes, strict=True):
        stop = start + size
        if isinstance(answer, Exception):
            errors.update(dict.fromkeys(range(start, stop), answer))
            documents += [None] * size
        else:
            # batch_key(key) is str(key) for all but tuples, which to_pylist never gives.
            documents += map(answer.get, map(str, keys[start:stop]))
        start = stop
    per_value = partial(_per_value, decoding.rows, documents, struct_type)
    settings = decoding.settings
    if settings.fields:  # dotted paths per field: the per-value decoder follows them
        decoded = per_value(range(len(documents)))
    else:
        picked = documents if not settings.path else [_pick(d, settings.path) for d in documents]
        decoded = decode_documents(picked, struct_type, decoding.schema, per_value)
    decoded.errors.update(errors)
    return decoded


class _Unpicked:
    """A document whose ``path`` meets a non-object: the per-value decoder says why."""


_UNPICKED = _Unpicked()


def _pick(document: Any, path: body.Path) -> Any:
    try:
        return body.pick(document, path)
    except DecodeError:
        return _UNPICKED


def _per_value(
    rows: Any, documents: list[Any], struct_type: pa.StructType, positions: Sequence[int]
) -> ColumnarAnswer:
    """``lookup_many``'s value (or DecodeError) of the documents at ``positions``, as
    an answer aligned with ``positions``."""
    found: dict[int, Any] = {}
    for position in positions:
        try:
            found[position] = rows(documents[position])
        except DecodeError as exc:
            found[position] = exc
    return answer_from_mapping(positions, found, struct_type)
