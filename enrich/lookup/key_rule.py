"""The key rule: what a lookup key may be, checked in bulk when rows are admitted.

A key is ``None`` (joins nothing), a part, or a tuple of parts (a composite key). A
part is a ``str``, an ``int`` (not a ``bool``) or ``bytes``. Nothing else is a key: a
``float``, a ``bool``, a date or a list would mean one thing to Python's equality
(``1 == 1.0 == True``, which coalescing and the cache rely on) and another to the store
(``user:1`` or ``user:1.0``), so it fails its own row with a :class:`~enrich.DecodeError`
naming the row, the field and the value; the ``on_error`` policy decides what that row
becomes, and no other row is touched. A subclass of ``str``, ``int`` or ``bytes`` (an
``IntEnum``, ``numpy.str_``) and a ``bytearray`` are taken as the plain value they hold;
a tuple with a ``None`` part is a null key.

So the key that is coalesced and cached is exactly what the store is asked for, and
``1``, ``1.0`` and ``True`` never share an answer.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import chain
from typing import Any

from .._errors import DecodeError
from ..engine.checks import short

PART_TYPES = frozenset({str, int, bytes})
_SCALAR_KEYS = PART_TYPES | {type(None)}
_COMPOSITE_KEYS = _SCALAR_KEYS | {tuple}
_RULE = "keys must be str, int or bytes (a tuple of them for a composite key)"


class BadKey:
    """Stands in for a row's key that breaks the rule. It carries the row's error, and
    equals nothing but itself, so that the row fails alone."""

    __slots__ = ("error",)

    def __init__(self, error: DecodeError) -> None:
        self.error = error


def admit_keys(keys: Sequence[Any], names: Sequence[str] = (), first_row: int = 0) -> Any:
    """``keys`` itself when every key keeps the rule; else a list of the same length where
    each key is normalised, or replaced by a :class:`BadKey` holding its row's error.

    Args:
        keys: one key per row.
        names: the key fields' names, to name them in errors (empty: unnamed).
        first_row: the number of the first row, for errors ("row 3: ...").
    """
    # The hot path, in bulk: the types of every row's key (not only of the distinct
    # keys, because 1, 1.0 and True are one dict key), then of the tuples' parts.
    types = set(map(type, keys))
    if types <= _SCALAR_KEYS:
        return keys
    if tuple in types and types <= _COMPOSITE_KEYS:
        tuples = keys if len(types) == 1 else [key for key in keys if type(key) is tuple]
        if all(tuples) and set(map(type, chain.from_iterable(tuples))) <= PART_TYPES:
            return keys
    return [_admit(key, first_row + i, names) for i, key in enumerate(keys)]


def _admit(key: Any, row: int, names: Sequence[str]) -> Any:
    kind = type(key)
    if kind in _SCALAR_KEYS or kind is BadKey:
        return key
    if kind is not tuple:
        return _part(key, row, _field(names, None))
    if not key:
        return BadKey(DecodeError(f"row {row}: the key is an empty tuple; {_RULE}", value=key))
    parts = []
    for i, part in enumerate(key):
        if part is None:
            return None  # a null part: the key joins nothing
        part = _part(part, row, _field(names, i, len(key)))
        if type(part) is BadKey:
            return part
        parts.append(part)
    return tuple(parts)


def _field(names: Sequence[str], index: int | None, width: int = 1) -> tuple[str, str | None]:
    """How an error names the key part: ('key field ...', the field) or unnamed."""
    if len(names) == width:
        name = names[index or 0]
        return f"key field {name!r}", name
    if index is None:
        return "the key", None
    return f"key part {index}", None


def _part(value: Any, row: int, field: tuple[str, str | None]) -> Any:
    """One key part as its plain type, or a :class:`BadKey` saying why it is none."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if not isinstance(value, (bool, float)) and type(value).__name__ != "bool_":
        try:
            return operator.index(value)  # int subclasses, numpy's integers
        except TypeError:
            pass
    label, name = field
    return BadKey(
        DecodeError(
            f"row {row}: {label} is a {type(value).__name__} ({short(value)}); {_RULE}",
            field=name,
            value=value,
        )
    )
