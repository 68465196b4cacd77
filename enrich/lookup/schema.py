"""Dimension schemas: the typed fields a lookup adds to each row.

A schema is written as Spark DDL (``"name string, tier string, credit double"``), a
mapping ``{"name": "string"}`` or a sequence of ``(name, type)`` pairs. Values read from a
store (JSON documents, Redis hashes of byte strings) are coerced field by field; a value
that does not fit raises :class:`~enrich.DecodeError` naming the field and the value, so
one bad row never fails a job.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Union

from .._errors import DecodeError, SchemaError

# Canonical type names and their accepted spellings (Spark's DDL keywords).
_ALIASES = {
    "string": "string",
    "varchar": "string",
    "text": "string",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "long": "bigint",
    "double": "double",
    "float": "float",
    "real": "float",
    "boolean": "boolean",
    "bool": "boolean",
    "binary": "binary",
}

_INT_RANGES = {"int": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class Field:
    """One dimension field: a name and a canonical type name."""

    name: str
    type: str


SchemaLike = Union["Schema", str, Mapping[str, str], Iterable[tuple[str, str]]]


class Schema:
    """An ordered list of typed fields, with per-field coercion of stored values.

    Attributes:
        fields: the fields, in order.
        names: the field names, in order.
        coerce_dict: :meth:`coerce` without its mapping check, for a document the
            caller already knows is a ``dict`` (``type(document) is dict``). A plain
            function rather than a method, so a decoder calling it once per value pays
            no bound-method call. Same result and errors as :meth:`coerce` for a dict.
    """

    __slots__ = ("coerce_dict", "fields", "names")

    def __init__(self, fields: Iterable[Field]) -> None:
        self.fields: tuple[Field, ...] = tuple(fields)
        if not self.fields:
            raise SchemaError("a schema needs at least one field")
        self.names: tuple[str, ...] = tuple(f.name for f in self.fields)
        seen: set[str] = set()
        for name in self.names:
            if name.lower() in seen:
                raise SchemaError(f"field {name!r} appears twice in the schema")
            seen.add(name.lower())
        self.coerce_dict: Callable[[Mapping[str, Any]], tuple[Any, ...]] = self._compile()

    @classmethod
    def of(cls, spec: SchemaLike) -> Schema:
        """Build a schema from DDL text, a mapping, pairs, or return a Schema unchanged."""
        if isinstance(spec, Schema):
            return spec
        if isinstance(spec, str):
            return cls._parse(spec)
        pairs = spec.items() if isinstance(spec, Mapping) else spec
        try:
            return cls(Field(str(name), _canonical(str(typ), str(name))) for name, typ in pairs)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, SchemaError):
                raise
            raise SchemaError(f"cannot read schema {spec!r}: {exc}") from exc

    @classmethod
    def _parse(cls, ddl: str) -> Schema:
        fields = []
        for part in ddl.split(","):
            words = part.split()
            if len(words) != 2:
                raise SchemaError(
                    f"cannot parse schema {ddl!r}: expected 'name type' but got {part.strip()!r}"
                )
            name = words[0].strip("`")
            fields.append(Field(name, _canonical(words[1], name)))
        return cls(fields)

    def ddl(self) -> str:
        """The schema as Spark DDL, e.g. ``"`name` string, `credit` double"``."""
        return ", ".join(f"`{f.name}` {f.type}" for f in self.fields)

    def coerce(self, document: Mapping[str, Any]) -> tuple[Any, ...]:
        """Pick and convert the schema's fields from ``document``; absent fields are None.

        Raises:
            DecodeError: ``document`` is not a mapping, or a field's value cannot be
                converted to the field's type.
        """
        if not isinstance(document, Mapping):
            raise DecodeError(
                f"expected an object with fields {list(self.names)}, got {_short(document)}",
                value=document,
            )
        return self.coerce_dict(document)

    def _compile(self) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
        """A function picking and converting every field, generated for this schema:
        values that already have the field's Python type pass with one type check."""
        lines = ["def coerce(document):", "    get = document.get"]
        env: dict[str, Any] = {"_convert": _convert}
        for i, field in enumerate(self.fields):
            native = _NATIVE[field.type]
            env[f"_f{i}"] = field
            env[f"_c{i}"] = _COERCERS[field.type]
            env[f"_t{i}"] = native
            lines.append(f"    v{i} = get({field.name!r})")
            check = f"type(v{i}) is not _t{i}" if native is not None else "True"
            lines.append(f"    if v{i} is not None and {check}:")
            lines.append(f"        v{i} = _convert(_c{i}, _f{i}, v{i})")
        values = ", ".join(f"v{i}" for i in range(len(self.fields)))
        lines.append(f"    return ({values},)")
        exec("\n".join(lines), env)  # generated from validated field names and types
        return env["coerce"]  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and other.fields == self.fields

    def __hash__(self) -> int:
        return hash(self.fields)

    def __repr__(self) -> str:
        return f"Schema({', '.join(f'{f.name} {f.type}' for f in self.fields)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Schema, (self.fields,))


def _canonical(type_name: str, field: str) -> str:
    canonical = _ALIASES.get(type_name.lower())
    if canonical is None:
        raise SchemaError(
            f"field {field!r}: unsupported type {type_name!r} "
            f"(supported: {', '.join(sorted(set(_ALIASES.values())))})"
        )
    return canonical


def _text(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw).decode("utf-8")
    raise TypeError(f"not text: {type(raw).__name__}")


def _to_string(raw: Any) -> str:
    if isinstance(raw, (str, bytes, bytearray)):
        return _text(raw)
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise TypeError(type(raw).__name__)
    return str(raw)  # JSON numbers in a string field: keep their spelling


def _integer(kind: str) -> Callable[[Any], int]:
    low, high = _INT_RANGES[kind]

    def coerce(raw: Any) -> int:
        if isinstance(raw, bool):
            raise TypeError("bool")
        if isinstance(raw, float):
            if not raw.is_integer():
                raise ValueError("not integral")
            raw = int(raw)
        elif not isinstance(raw, int):
            raw = int(_text(raw).strip())
        if not low <= raw <= high:
            raise OverflowError(f"out of range for {kind}")
        return int(raw)

    return coerce


def _to_float(raw: Any) -> float:
    if isinstance(raw, bool):
        raise TypeError("bool")
    if isinstance(raw, (int, float)):
        return float(raw)
    value = float(_text(raw).strip())
    if math.isnan(value) and _text(raw).strip().lower() not in ("nan", "+nan", "-nan"):
        raise ValueError("nan")
    return value


_TRUE = {"true", "1", "t", "yes", "y"}
_FALSE = {"false", "0", "f", "no", "n"}


def _to_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    text = _text(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError("not a boolean")


def _to_binary(raw: Any) -> bytes:
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw)
    if isinstance(raw, str):
        return raw.encode("utf-8")
    raise TypeError(type(raw).__name__)


def _convert(coerce: Callable[[Any], Any], field: Field, raw: Any) -> Any:
    try:
        return coerce(raw)
    except (TypeError, ValueError, OverflowError) as exc:
        raise DecodeError(
            f"field {field.name!r}: cannot read {_short(raw)} as {field.type}",
            field=field.name,
            value=raw,
        ) from exc


# The Python type a field's value already has when it needs no conversion (ints are
# range-checked and JSON numbers may be ints for a double, so those always convert).
_NATIVE: dict[str, type | None] = {
    "string": str,
    "int": None,
    "bigint": None,
    "double": float,
    "float": float,
    "boolean": bool,
    "binary": bytes,
}

_COERCERS: dict[str, Callable[[Any], Any]] = {
    "string": _to_string,
    "int": _integer("int"),
    "bigint": _integer("bigint"),
    "double": _to_float,
    "float": _to_float,
    "boolean": _to_bool,
    "binary": _to_binary,
}


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
