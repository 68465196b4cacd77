"""Dimension schemas: the typed fields a lookup adds to each row.

A schema is written as Spark DDL (``"name string, price decimal(10,2), tags
array<string>"``, see :mod:`enrich.engine.records.data_types` for what parses), a mapping
``{"name": "string"}`` or a sequence of ``(name, type)`` pairs (types as DDL text or
:class:`~enrich.engine.records.data_types.DataType` objects). Values read from a store (JSON
documents, Redis hashes of byte strings) are converted field by field by the rules of
:mod:`enrich.engine.records.coerce`; a value that does not fit raises :class:`~enrich.DecodeError`
naming the field (a dotted path inside a nested value) and the value, so one bad row
never fails a job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union

from ..._errors import DecodeError, SchemaError
from ..checks import short
from .coerce import ERRORS, Converter, Unfit, converter, has_decimal, json_loads, native
from .data_types import Field, check_unique
from .ddl import parse_fields

__all__ = ("Field", "Schema", "SchemaLike", "short")

SchemaLike = Union["Schema", str, Mapping[str, Any], Iterable[tuple[str, Any]]]


class Schema:
    """An ordered list of typed fields, with per-field conversion of stored values.

    Attributes:
        fields: the fields, in order.
        names: the field names, in order.
        coerce_dict: :meth:`coerce` without its mapping check, for a document the
            caller already knows is a ``dict`` (``type(document) is dict``). A plain
            function rather than a method, so a decoder calling it once per value pays
            no bound-method call. Same result and errors as :meth:`coerce` for a dict.
        loads: the JSON parser for this schema's documents: orjson (or json) when no
            field holds a decimal, else json reading floats as ``Decimal``, so decimals
            keep every digit of the stored text.
    """

    __slots__ = ("coerce_dict", "fields", "loads", "names")

    def __init__(self, fields: Iterable[Field]) -> None:
        self.fields: tuple[Field, ...] = tuple(fields)
        if not self.fields:
            raise SchemaError("a schema needs at least one field")
        for f in self.fields:
            if not isinstance(f, Field):
                raise SchemaError(f"a schema holds Field objects, got {f!r}")
        self.names: tuple[str, ...] = tuple(f.name for f in self.fields)
        try:
            check_unique(self.names)
        except SchemaError as exc:
            raise SchemaError(f"{exc} in the schema") from None
        self.loads: Callable[[Any], Any] = json_loads(any(has_decimal(f.type) for f in self.fields))
        self.coerce_dict: Callable[[Mapping[str, Any]], tuple[Any, ...]] = self._compile()

    @classmethod
    def of(cls, spec: SchemaLike) -> Schema:
        """Build a schema from DDL text, a mapping, pairs, or return a Schema unchanged.

        Raises:
            SchemaError: the spec does not parse, naming the field and the text.
        """
        if isinstance(spec, Schema):
            return spec
        if isinstance(spec, str):
            try:
                return cls(parse_fields(spec))
            except SchemaError as exc:
                if spec in str(exc):
                    raise
                raise SchemaError(f"schema {spec!r}: {exc}") from None
        try:
            pairs = spec.items() if isinstance(spec, Mapping) else spec
            return cls(Field(str(name), typ) for name, typ in pairs)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, SchemaError):
                raise
            raise SchemaError(f"cannot read schema {spec!r}: {exc}") from exc

    def ddl(self) -> str:
        """The schema as Spark DDL, e.g. ``"`name` string, `price` decimal(10,2)"``."""
        return ", ".join(f.ddl() for f in self.fields)

    def coerce(self, document: Mapping[str, Any]) -> tuple[Any, ...]:
        """Pick and convert the schema's fields from ``document``; absent fields are None.

        Raises:
            DecodeError: ``document`` is not a mapping, or a field's value cannot be
                converted to the field's type (or is null in a ``NOT NULL`` field).
        """
        if not isinstance(document, Mapping):
            raise DecodeError(
                f"expected an object with fields {list(self.names)}, got {short(document)}",
                value=document,
            )
        return self.coerce_dict(document)

    def _compile(self) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
        """A function picking and converting every field, generated for this schema:
        values that already have the field's Python type pass with one type check."""
        lines = ["def coerce(document):", "    get = document.get"]
        env: dict[str, Any] = {"_convert": _convert, "_null": _null}
        for i, field in enumerate(self.fields):
            kind = native(field.type)
            env[f"_f{i}"] = field
            env[f"_c{i}"] = converter(field.type)
            env[f"_t{i}"] = kind
            lines.append(f"    v{i} = get({field.name!r})")
            check = f"type(v{i}) is not _t{i}" if kind is not None else "True"
            lines.append(f"    if v{i} is not None and {check}:")
            lines.append(f"        v{i} = _convert(_c{i}, _f{i}, v{i})")
            if not field.nullable:
                lines.append(f"    if v{i} is None:")
                lines.append(f"        _null(_f{i})")
        values = ", ".join(f"v{i}" for i in range(len(self.fields)))
        lines.append(f"    return ({values},)")
        exec("\n".join(lines), env)  # generated from validated field names and types
        return env["coerce"]  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and other.fields == self.fields

    def __hash__(self) -> int:
        return hash(self.fields)

    def __repr__(self) -> str:
        return f"Schema({', '.join(f.ddl(plain=True) for f in self.fields)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Schema, (self.fields,))


def _convert(convert: Converter, field: Field, raw: Any) -> Any:
    try:
        return convert(raw)
    except Unfit as exc:
        path = field.name + exc.path
        raise DecodeError(
            f"field {path!r}: cannot read {short(exc.value)} as {exc.type}",
            field=path,
            value=exc.value,
        ) from None
    except ERRORS as exc:
        raise DecodeError(
            f"field {field.name!r}: cannot read {short(raw)} as {field.type}",
            field=field.name,
            value=raw,
        ) from exc


def _null(field: Field) -> None:
    raise DecodeError(
        f"field {field.name!r}: missing or null, but declared {field.type} NOT NULL",
        field=field.name,
    )
