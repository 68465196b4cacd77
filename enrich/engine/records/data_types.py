"""Dimension data types: Spark SQL's scalars and nested types, as frozen values.

The types are Spark SQL's: scalars (``string``, ``tinyint`` ... ``bigint``, ``float``,
``double``, ``decimal(p,s)``, ``boolean``, ``binary``, ``date``, ``timestamp``,
``timestamp_ntz``) and nested ``array<T>``, ``map<K,V>`` and ``struct<a: T, ...>``.
:mod:`enrich.engine.records.ddl` parses DDL text into them; ``str(t)`` is the canonical DDL.
The parser builds these types, so this module does not import it: it registers itself
here (:func:`read_ddl_with`) when imported, which importing :mod:`enrich` always does.

Nothing here imports pyarrow or pyspark: :mod:`enrich.engine.records.arrow_types` and
:func:`enrich.spark.spark_type` map these types to theirs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..._errors import SchemaError

__all__ = (
    "DataType",
    "AtomicType",
    "DecimalType",
    "ArrayType",
    "MapType",
    "StructType",
    "Field",
)


class DataType:
    """A dimension field's type; ``str(t)`` is its canonical DDL (``"decimal(10,2)"``)."""

    __slots__ = ()

    def ddl(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.ddl()


@dataclass(frozen=True, repr=False)
class AtomicType(DataType):
    """A scalar type other than decimal, by its canonical name (``"bigint"``)."""

    name: str

    def ddl(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"AtomicType({self.name!r})"


@dataclass(frozen=True)
class DecimalType(DataType):
    """``decimal(precision, scale)``: at most ``precision`` digits, ``scale`` of them
    after the point; Spark's limits (precision 1-38, 0 <= scale <= precision)."""

    precision: int = 10
    scale: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.precision <= 38 or not 0 <= self.scale <= self.precision:
            raise SchemaError(
                f"decimal({self.precision},{self.scale}): precision must be 1-38 and the "
                f"scale 0-precision"
            )

    def ddl(self) -> str:
        return f"decimal({self.precision},{self.scale})"


@dataclass(frozen=True)
class ArrayType(DataType):
    """``array<element>``; elements may be null."""

    element: DataType

    def ddl(self) -> str:
        return f"array<{self.element.ddl()}>"


@dataclass(frozen=True)
class MapType(DataType):
    """``map<key, value>``; keys are scalars and never null, values may be null."""

    key: DataType
    value: DataType

    def __post_init__(self) -> None:
        if not isinstance(self.key, (AtomicType, DecimalType)):
            raise SchemaError(f"map keys must be a scalar type, got {self.key.ddl()!r}")

    def ddl(self) -> str:
        return f"map<{self.key.ddl()},{self.value.ddl()}>"


@dataclass(frozen=True)
class StructType(DataType):
    """``struct<a: T, ...>``: named fields, in order, names unique (ignoring case)."""

    fields: tuple[Field, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        if not self.fields:
            raise SchemaError("a struct needs at least one field")
        check_unique(f.name for f in self.fields)

    def ddl(self) -> str:
        return f"struct<{', '.join(f.ddl(':') for f in self.fields)}>"


@dataclass(frozen=True)
class Field:
    """One named, typed field; ``type`` may be given as DDL text (``Field("p", "int")``).

    ``nullable=False`` (``NOT NULL``) makes a found row whose value is missing or null a
    decode error; a miss still gives nulls in a left join.
    """

    name: str
    type: DataType
    nullable: bool = True
    comment: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError(f"a field name must be a non-empty string, got {self.name!r}")
        if isinstance(self.type, str):
            object.__setattr__(self, "type", _parse_type(self.type, field=self.name))
        elif not isinstance(self.type, DataType):
            raise SchemaError(f"field {self.name!r}: not a type: {self.type!r}")

    def ddl(self, colon: str = "", *, plain: bool = False) -> str:
        """The field as DDL; ``plain``: the name backquoted only when it must be."""
        name = self.name if plain and _PLAIN.fullmatch(self.name) else quote(self.name)
        text = f"{name}{colon} {self.type.ddl()}"
        if not self.nullable:
            text += " NOT NULL"
        if self.comment is not None:
            text += " COMMENT '" + self.comment.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return text


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def quote(name: str) -> str:
    """``name`` backquoted for DDL (a backquote inside is doubled)."""
    return "`" + name.replace("`", "``") + "`"


def check_unique(names: Any) -> None:
    """Raise SchemaError when two names are equal ignoring case (Spark resolves names
    case-insensitively by default)."""
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise SchemaError(f"field {name!r} appears twice")
        seen.add(name.lower())


def _no_parser(text: str, *, field: str | None = None) -> DataType:
    raise SchemaError(  # pragma: no cover - importing enrich registers the parser
        f"field {field!r}: DDL text {text!r} needs enrich.engine.records.ddl, which was "
        "not imported"
    )


# DDL text -> type, for ``Field(name, "text")``: enrich.engine.records.ddl's parse_type.
_parse_type: Callable[..., DataType] = _no_parser


def read_ddl_with(parse_type: Callable[..., DataType]) -> None:
    """Make ``parse_type(text, field=name)`` the reader of DDL text given as a field's
    type (called once, by :mod:`enrich.engine.records.ddl` when it is imported)."""
    global _parse_type
    _parse_type = parse_type
