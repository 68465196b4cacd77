"""Outcomes of a columnar answer and of a ``lookup_many`` mapping, in one comparable form."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from enrich.lookup.columnar import ColumnarAnswer, struct_rows


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
