"""The DDL parser: what Spark's own parser reads for a schema, and errors naming the field."""

from __future__ import annotations

import pytest

from enrich import Field, Schema, SchemaError
from enrich.engine.records.data_types import (
    ArrayType,
    AtomicType,
    DecimalType,
    MapType,
    StructType,
)
from enrich.engine.records.ddl import parse_fields, parse_type

STRING, INT, BIGINT = AtomicType("string"), AtomicType("int"), AtomicType("bigint")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # scalars and their synonyms, any case
        ("string", STRING),
        ("VARCHAR(20)", STRING),
        ("char( 50 )", STRING),
        ("tinyint", AtomicType("tinyint")),
        ("BYTE", AtomicType("tinyint")),
        ("smallint", AtomicType("smallint")),
        ("short", AtomicType("smallint")),
        ("INT ", INT),
        ("Integer", INT),
        ("long", BIGINT),
        ("real", AtomicType("float")),
        ("DOUBLE", AtomicType("double")),
        ("boolean", AtomicType("boolean")),
        ("binary", AtomicType("binary")),
        ("date", AtomicType("date")),
        ("timestamp", AtomicType("timestamp")),
        ("TIMESTAMP_LTZ", AtomicType("timestamp")),
        ("timestamp_ntz", AtomicType("timestamp_ntz")),
        # decimals: Spark's default (10,0), a precision alone, spaces inside
        ("decimal", DecimalType(10, 0)),
        ("decimal(5)", DecimalType(5, 0)),
        ("decimal(10,2)", DecimalType(10, 2)),
        ("DECIMAL(  16 , 8   )", DecimalType(16, 8)),
        ("numeric(38,38)", DecimalType(38, 38)),
        ("dec(3,1)", DecimalType(3, 1)),
        # nested
        ("array< short>", ArrayType(AtomicType("smallint"))),
        (" map<string , string > ", MapType(STRING, STRING)),
        ("map<int,array<decimal(10,2)>>", MapType(INT, ArrayType(DecimalType(10, 2)))),
        (
            "struct<city: string, zip INT NOT NULL>",
            StructType((Field("city", STRING), Field("zip", INT, nullable=False))),
        ),
        (
            "array<struct<`a b`:int COMMENT 'x, y'>>",
            ArrayType(StructType((Field("a b", INT, comment="x, y"),))),
        ),
    ],
)
def test_types_parse_as_spark_reads_them(text: str, expected: object) -> None:
    assert parse_type(text) == expected


def test_a_schema_with_every_feature() -> None:
    fields = parse_fields(
        "id BIGINT NOT NULL COMMENT 'the key', `unit price`: decimal(10,2), "
        "`we``ird, name` string, tags array<string>, "
        'attrs MAP<STRING, STRING>, at timestamp COMMENT "when", '
        "address struct<street string, city: string NOT NULL>"
    )
    assert fields == (
        Field("id", BIGINT, nullable=False, comment="the key"),
        Field("unit price", DecimalType(10, 2)),
        Field("we`ird, name", STRING),
        Field("tags", ArrayType(STRING)),
        Field("attrs", MapType(STRING, STRING)),
        Field("at", AtomicType("timestamp"), comment="when"),
        Field(
            "address",
            StructType((Field("street", STRING), Field("city", STRING, nullable=False))),
        ),
    )


def test_spark_examples_of_schemas() -> None:
    # pyspark's own _parse_datatype_string examples, and a struct as the whole schema
    assert parse_fields("a: byte, b: decimal(  16 , 8   ) ") == (
        Field("a", AtomicType("tinyint")),
        Field("b", DecimalType(16, 8)),
    )
    assert parse_fields("a DOUBLE, b CHAR( 50 )") == (
        Field("a", AtomicType("double")),
        Field("b", STRING),
    )
    assert parse_fields("struct<a:int,b:string>") == (Field("a", INT), Field("b", STRING))
    assert parse_fields("string string") == (Field("string", STRING),)  # names may be keywords


def test_comments_unescape_and_ddl_round_trips() -> None:
    schema = Schema.of(
        r"`a``b` int NOT NULL COMMENT 'it\'s', s struct<`x y`: array<map<string,date>>>"
    )
    assert schema.fields[0] == Field("a`b", INT, nullable=False, comment="it's")
    assert Schema.of(schema.ddl()) == schema
    assert str(schema.fields[1].type) == "struct<`x y`: array<map<string,date>>>"


def test_mappings_and_pairs_still_work_with_every_type() -> None:
    expected = Schema.of("name string, price decimal(10,2), tags array<string>")
    assert Schema.of({"name": "string", "price": "decimal(10,2)", "tags": "array<string>"}) == (
        expected
    )
    assert Schema.of([("name", "string"), ("price", DecimalType(10, 2)), ("tags", "array<string>")])
    assert Field("p", "DECIMAL(10, 2)").type == DecimalType(10, 2)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # the comma inside decimal(10,2) used to split the schema
        ("price decimal(10", "field 'price': expected ')' at position 16, found the end"),
        ("name string tier", "after field 'name': expected ',' or the end at position 12"),
        ("a interval", "field 'a': unsupported type 'interval'"),
        ("blabla", "field 'blabla': expected a type at position 6, found the end"),
        ("a: int,", "expected a field name at position 7, found the end"),
        ("a array<int", "field 'a': expected '>' at position 11"),
        ("a map<int, boolean>>", "after field 'a': expected ',' or the end at position 19"),
        ("a map<array<int>,int>", "field 'a': map keys must be a scalar type"),
        ("a decimal(40,2)", "field 'a': decimal(40,2): precision must be 1-38"),
        ("a decimal(5,6)", "field 'a': decimal(5,6)"),
        (
            "s struct<b: decimal(10,x)>",
            "field 's.b': expected a number at position 23, found 'x)>'",
        ),
        ("s struct<b int, B int>", "field 's': field 'B' appears twice"),
        ("s struct<>", "field 's': expected a field name"),
        ("`a int", "expected a closing ` at position 0"),
        ("a string COMMENT 'x", "expected a closing ' at position 17"),
        ("a int NOT", "field 'a': expected NULL after NOT"),
        ("a int COMMENT x", "field 'a': expected a quoted comment after COMMENT"),
        ("a int, A string", "field 'A' appears twice in the schema"),
        ("a int; drop", "expected a name, a type or one of"),
        ("", "expected a field name at position 0"),
    ],
)
def test_errors_name_the_field_and_the_text(text: str, message: str) -> None:
    with pytest.raises(SchemaError) as info:
        Schema.of(text)
    assert message in str(info.value)
    assert repr(text) in str(info.value) or "twice" in message


def test_bad_types_in_mappings_name_the_field() -> None:
    with pytest.raises(SchemaError, match="field 'p': unsupported type 'money'"):
        Schema.of({"p": "money"})
    with pytest.raises(SchemaError, match="field 'q': not a type: 3"):
        Schema.of({"q": 3})
