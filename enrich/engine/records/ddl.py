"""Spark DDL text parsed into dimension types (:mod:`enrich.engine.records.data_types`).

The parser reads what Spark's DDL parser reads for a schema: keywords in any case, a colon
between a name and its type or not, backquoted names (```my field```, with ``````
for a backquote), ``NOT NULL`` and ``COMMENT '...'`` after a type, and nested
``array<T>``, ``map<K,V>`` and ``struct<a: T, ...>``. Synonyms become one canonical type
(``integer`` is ``int``, ``varchar(20)`` is ``string``: lengths are not enforced;
``decimal`` alone is ``decimal(10,0)``). Whatever does not parse raises
:class:`~enrich.SchemaError` naming the field and the text where reading stopped.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, NoReturn

from ..._errors import SchemaError
from .data_types import (
    ArrayType,
    AtomicType,
    DataType,
    DecimalType,
    Field,
    MapType,
    StructType,
    read_ddl_with,
)

__all__ = ("parse_type", "parse_fields", "SUPPORTED")

_ATOMIC = {
    name: AtomicType(canonical)
    for canonical, spellings in {
        "string": ("string", "varchar", "char", "character", "text"),
        "tinyint": ("tinyint", "byte"),
        "smallint": ("smallint", "short"),
        "int": ("int", "integer"),
        "bigint": ("bigint", "long"),
        "float": ("float", "real"),
        "double": ("double",),
        "boolean": ("boolean", "bool"),
        "binary": ("binary",),
        "date": ("date",),
        "timestamp": ("timestamp", "timestamp_ltz"),
        "timestamp_ntz": ("timestamp_ntz",),
    }.items()
    for name in spellings
}
_DECIMAL = ("decimal", "dec", "numeric")
_STRING_LENGTH = ("varchar", "char", "character")
_NAMES = (*_ATOMIC, *_DECIMAL, "array", "map", "struct")  # for "did you mean"
SUPPORTED = (
    "string, varchar(n), char(n), tinyint, smallint, int, bigint, float, double, "
    "decimal(p,s), boolean, binary, date, timestamp, timestamp_ntz, array<T>, map<K,V>, "
    "struct<name: T, ...>"
)

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<quoted>`(?:[^`]|``)*`)
    | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    | (?P<word>[A-Za-z0-9_]+)
    | (?P<punct>[<>(),:])
    )""",
    re.VERBOSE | re.DOTALL,
)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def parse_type(text: str, *, field: str | None = None) -> DataType:
    """The type written in ``text`` (``"decimal(10,2)"``, ``"array<struct<a:int>>"``).

    Raises:
        SchemaError: ``text`` is not one type, naming ``field`` when given.
    """
    parser = _Parser(text, field)
    parsed = parser.type_()
    parser.end()
    return parsed


def parse_fields(text: str) -> tuple[Field, ...]:
    """The fields of a schema written as DDL: ``"name string, price decimal(10,2)"`` (or
    ``"struct<...>"``).

    Raises:
        SchemaError: the text does not parse, naming the field and where reading stopped.
    """
    parser = _Parser(text, None)
    if parser.peek_word() == "struct" and parser.peek(1) == "<":
        parsed = parser.type_()
        parser.end()
        assert isinstance(parsed, StructType)
        return parsed.fields
    fields = [parser.field()]
    while parser.accept(","):
        fields.append(parser.field())
    parser.end()
    return tuple(fields)


class _Parser:
    """A recursive-descent reader over the tokens of one DDL text."""

    def __init__(self, text: str, field: str | None) -> None:
        if not isinstance(text, str):
            raise SchemaError(f"a schema or type must be DDL text, got {text!r}")
        self.text = text
        self.path = [] if field is None else [field]
        self.last: str | None = None  # the last field read, for errors after it
        self.tokens: list[tuple[str, str, int]] = []  # (kind, text, offset)
        pos = 0
        while True:
            match = _TOKEN.match(text, pos)
            if match is None or match.lastgroup is None:
                if text[pos:].strip():
                    start = len(text) - len(text[pos:].lstrip())
                    opener = text[start]
                    expected = (
                        f"a closing {opener}"
                        if opener in "`'\""
                        else "a name, a type or one of < > ( ) , :"
                    )
                    self.fail(expected, at=start)
                break
            kind = match.lastgroup
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            pos = match.end()
        self.index = 0

    # -- tokens -------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> str | None:
        i = self.index + ahead
        return self.tokens[i][1] if i < len(self.tokens) else None

    def peek_word(self) -> str | None:
        if self.index < len(self.tokens) and self.tokens[self.index][0] == "word":
            return self.tokens[self.index][1].lower()
        return None

    def accept(self, punct: str) -> bool:
        if self.index < len(self.tokens) and self.tokens[self.index][1] == punct:
            self.index += 1
            return True
        return False

    def expect(self, punct: str) -> None:
        if not self.accept(punct):
            self.fail(repr(punct))

    def end(self) -> None:
        if self.index < len(self.tokens):
            self.fail("',' or the end" if self.path == [] else "the end")

    def fail(self, expected: str, *, at: int | None = None) -> NoReturn:
        if at is None:
            at = self.tokens[self.index][2] if self.index < len(self.tokens) else len(self.text)
        rest = self.text[at:]
        found = (
            "the end" if not rest.strip() else repr(rest if len(rest) <= 30 else rest[:27] + "...")
        )
        if self.path:
            where = f"field {'.'.join(self.path)!r}: "
        else:
            where = f"after field {self.last!r}: " if self.last is not None else ""
        raise SchemaError(
            f"cannot parse {self.text!r}: {where}expected {expected} at position {at}, "
            f"found {found}"
        )

    # -- grammar ------------------------------------------------------------------------
    def name(self) -> str:
        if self.index >= len(self.tokens) or self.tokens[self.index][0] not in ("word", "quoted"):
            self.fail("a field name")
        kind, text, _ = self.tokens[self.index]
        self.index += 1
        return text[1:-1].replace("``", "`") if kind == "quoted" else text

    def field(self) -> Field:
        name = self.name()
        self.path.append(name)
        self.accept(":")
        type_ = self.type_()
        nullable = True
        comment = None
        while (word := self.peek_word()) in ("not", "comment"):
            self.index += 1
            if word == "not":
                if self.peek_word() != "null":
                    self.fail("NULL after NOT")
                self.index += 1
                nullable = False
            else:
                if self.index >= len(self.tokens) or self.tokens[self.index][0] != "string":
                    self.fail("a quoted comment after COMMENT")
                raw = self.tokens[self.index][1][1:-1]
                comment = _ESCAPE.sub(r"\1", raw)
                self.index += 1
        self.path.pop()
        self.last = name
        return Field(name, type_, nullable, comment)

    def type_(self) -> DataType:
        word = self.peek_word()
        if word is None:
            self.fail("a type")
        start = self.tokens[self.index][2]
        self.index += 1
        if word == "array":
            self.expect("<")
            element = self.type_()
            self.expect(">")
            return ArrayType(element)
        if word == "map":
            self.expect("<")
            key = self.type_()
            self.expect(",")
            value = self.type_()
            self.expect(">")
            return self.checked(lambda: MapType(key, value), start)
        if word == "struct":
            self.expect("<")
            fields = [self.field()]
            while self.accept(","):
                fields.append(self.field())
            self.expect(">")
            return self.checked(lambda: StructType(tuple(fields)), start)
        if word in _DECIMAL:
            args = self.arguments(2)
            return self.checked(lambda: DecimalType(*args), start)
        atomic = _ATOMIC.get(word)
        if atomic is None:
            where = f"field {'.'.join(self.path)!r}: " if self.path else ""
            written = self.tokens[self.index - 1][1]
            close = difflib.get_close_matches(word, _NAMES, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SchemaError(
                f"cannot parse {self.text!r}: {where}unsupported type "
                f"{written!r}{hint} (supported: {SUPPORTED})"
            )
        if word in _STRING_LENGTH:
            self.arguments(1)
        return atomic

    def arguments(self, most: int) -> tuple[int, ...]:
        """``(n)`` or ``(n, m)`` after a type name, or nothing."""
        if not self.accept("("):
            return ()
        values = []
        while True:
            token = self.peek()
            if token is None or not token.isdigit():
                self.fail("a number")
            values.append(int(token))
            self.index += 1
            if len(values) == most or not self.accept(","):
                break
        self.expect(")")
        return tuple(values)

    def checked(self, build: Any, start: int) -> DataType:
        try:
            return build()  # type: ignore[no-any-return]
        except SchemaError as exc:
            where = f"field {'.'.join(self.path)!r}: " if self.path else ""
            raise SchemaError(
                f"cannot parse {self.text!r}: {where}{exc} (at position {start})"
            ) from None


read_ddl_with(parse_type)  # Field("p", "int") reads its type with this parser
