"""Outcomes of a columnar answer and of a ``lookup_many`` mapping, in one comparable form."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from enrich.lookup.contract.columnar_answer import ColumnarAnswer, struct_rows

# The dimension both connectors' columnar tests decode into: every bulk type once.
SCHEMA = "name string, n int, big bigint, score double, ratio float, ok boolean"
STRUCT = pa.struct(
    [
        ("name", pa.string()),
        ("n", pa.int32()),
        ("big", pa.int64()),
        ("score", pa.float64()),
        ("ratio", pa.float32()),
        ("ok", pa.bool_()),
    ]
)

# Valid JSON documents where a bulk decoder and the per-value decoder could disagree
# (into STRUCT); each connector's tests add the values only its own path sees.
DOCUMENTS: dict[str, bytes] = {
    "plain": b'{"name": "Ada", "n": 1, "big": 9007199254740993, "score": 2, "ok": true}',
    "extra": b'{"name": "x", "other": [1, {"deep": null}]}',
    "unicode": b'{"name": "\\u00e9\\ud83d\\ude00"}',
    "nulls": b'{"name": null, "n": null}',
    "empty": b"{}",
    "number_as_name": b'{"name": 42}',
    "float_as_int": b'{"n": 3.0}',
    "fraction_as_int": b'{"n": 3.5}',
    "int_overflow": b'{"n": 2147483648}',
    "text_as_int": b'{"n": "12"}',
    "int_as_bool": b'{"ok": 1}',
    "duplicate": b'{"name": "a", "name": "b"}',
    "empty_array": b"[]",
    "json_null": b"null",
    "object_as_name": b'{"name": {"x": 1}}',
}


def outcomes(keys: Sequence[Any], answer: ColumnarAnswer) -> dict[Any, Any]:
    """Key -> its row (None: a miss), ``("rows", [...])`` or ``("error", type, text)``."""
    rows = struct_rows(answer.rows)
    out: dict[Any, Any] = {}
    for i, key in enumerate(keys):
        if i in answer.errors:
            out[key] = ("error", type(answer.errors[i]).__name__, str(answer.errors[i]))
        elif i in answer.multi:
            out[key] = ("rows", answer.multi[i])
        else:
            out[key] = rows[i]
    return out


def expected(keys: Sequence[Any], found: Mapping[Any, Any]) -> dict[Any, Any]:
    """The same form for ``lookup_many``'s answer ``found``."""
    out: dict[Any, Any] = {}
    for key in keys:
        answer = found.get(key)
        if isinstance(answer, BaseException):
            out[key] = ("error", type(answer).__name__, str(answer))
        elif isinstance(answer, list):
            out[key] = ("rows", answer) if answer else None
        else:
            out[key] = answer
    return out
