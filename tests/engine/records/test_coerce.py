"""Conversion of stored values into every type: good values, and bad ones as DecodeErrors
naming the field (a path inside nested values) and the value."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from enrich import DecodeError, Schema

UTC = timezone.utc


def one(type_: str, raw: Any) -> Any:
    """``raw`` converted as the value of a field ``v`` of ``type_``."""
    return Schema.of({"v": type_}).coerce({"v": raw})[0]


@pytest.mark.parametrize(
    ("type_", "raw", "expected"),
    [
        ("tinyint", -128, -128),
        ("tinyint", b"127", 127),
        ("smallint", "32767", 32767),
        ("int", 7.0, 7),
        ("int", Decimal("7.0"), 7),
        ("bigint", 2**63 - 1, 2**63 - 1),
        ("double", Decimal("1.5"), 1.5),
        ("float", b"2.5", 2.5),
        ("string", 12.5, "12.5"),
        ("string", Decimal("12.50"), "12.50"),
        ("boolean", b"yes", True),
        ("binary", "aGVsbG8=", b"hello"),  # JSON: base64
        ("binary", b"\x00\xff", b"\x00\xff"),  # a hash field or string value: as stored
        ("decimal(10,2)", 19.99, Decimal("19.99")),
        ("decimal(10,2)", "19.999", Decimal("20.00")),  # rounded half up, as Spark casts
        ("decimal(10,2)", b"-0.005", Decimal("-0.01")),
        ("decimal(10,2)", 12, Decimal("12.00")),
        ("decimal(38,0)", "9" * 38, Decimal("9" * 38)),
        (
            "decimal(38,10)",
            Decimal("1234567890123456789012345678.0123456789"),
            Decimal("1234567890123456789012345678.0123456789"),
        ),
        ("date", "2024-02-29", date(2024, 2, 29)),
        ("date", "2024-02-29T23:30:00-05:00", date(2024, 2, 29)),  # the date as written
        ("date", 19782, date(2024, 2, 29)),  # days since 1970-01-01
        ("date", b"-1", date(1969, 12, 31)),
        ("timestamp", "2024-05-01T12:30:00Z", datetime(2024, 5, 1, 12, 30, tzinfo=UTC)),
        ("timestamp", "2024-05-01T14:30:00+02:00", datetime(2024, 5, 1, 12, 30, tzinfo=UTC)),
        (
            "timestamp",
            "2024-05-01 12:30:00.123456",
            datetime(2024, 5, 1, 12, 30, 0, 123456, tzinfo=UTC),
        ),  # naive: UTC
        ("timestamp", "2024-05-01", datetime(2024, 5, 1, tzinfo=UTC)),
        ("timestamp", 1714566600, datetime(2024, 5, 1, 12, 30, tzinfo=UTC)),  # seconds
        ("timestamp", 1714566600.25, datetime(2024, 5, 1, 12, 30, 0, 250000, tzinfo=UTC)),
        ("timestamp", 1714566600123, datetime(2024, 5, 1, 12, 30, 0, 123000, tzinfo=UTC)),  # ms
        ("timestamp", b"1714566600", datetime(2024, 5, 1, 12, 30, tzinfo=UTC)),
        (
            "timestamp",
            99_999_999_999,
            datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=99_999_999_999),
        ),
        (
            "timestamp",
            100_000_000_000,
            datetime(1973, 3, 3, 9, 46, 40, tzinfo=UTC),
        ),  # from 1e11: ms
        ("timestamp_ntz", "2024-05-01T14:30:00+02:00", datetime(2024, 5, 1, 14, 30)),  # wall clock
        ("timestamp_ntz", 1714566600, datetime(2024, 5, 1, 12, 30)),
    ],
)
def test_scalar_values(type_: str, raw: Any, expected: Any) -> None:
    value = one(type_, raw)
    assert value == expected
    assert type(value) is type(expected)
    if isinstance(expected, datetime):
        assert value.tzinfo == expected.tzinfo


@pytest.mark.parametrize(
    ("type_", "raw"),
    [
        ("tinyint", 128),
        ("smallint", -32769),
        ("int", 1.5),
        ("int", True),
        ("double", "abc"),
        ("boolean", "maybe"),
        ("binary", "not base64!"),
        ("binary", 5),
        ("decimal(4,2)", 100),  # three digits before the point in decimal(4,2)
        ("decimal(4,2)", "99.996"),  # rounds to 100.00
        ("decimal(10,2)", "12,50"),
        ("decimal(10,2)", "NaN"),
        ("decimal(10,2)", float("inf")),
        ("decimal(10,2)", True),
        ("date", "2024-02-30"),
        ("date", "yesterday"),
        ("date", 1.5),
        ("date", 10**9),
        ("timestamp", "2024-13-01T00:00:00"),
        ("timestamp", "noon"),
        ("timestamp", float("nan")),
        ("timestamp", 10**20),
        ("timestamp_ntz", [1]),
        ("string", {"a": 1}),
    ],
)
def test_bad_scalars_name_the_field_and_the_value(type_: str, raw: Any) -> None:
    with pytest.raises(DecodeError) as info:
        one(type_, raw)
    assert info.value.field == "v"
    assert info.value.value == raw or raw != raw  # nan != nan
    assert (
        str(info.value)
        == f"field 'v': cannot read {raw!r} as {Schema.of({'v': type_}).fields[0].type}"
    )


NESTED = Schema.of(
    "tags array<string>, scores array<int>, attrs map<string,string>, "
    "by_day map<date, decimal(6,2)>, "
    "address struct<street: string, zip: int NOT NULL, geo struct<lat double, lon double>>, "
    "items array<struct<sku string, price decimal(10,2), at timestamp>>"
)


def test_nested_values_from_json() -> None:
    document = json.loads(
        """{"tags": ["a", null, "c"], "scores": [1, 2.0, "3"], "attrs": {"k": "v", "n": null},
        "by_day": {"2024-01-02": "1.5", "19725": 2},
        "address": {"street": "Main", "zip": "12345", "geo": {"lat": 1, "lon": 2.5}, "x": 1},
        "items": [{"sku": "a", "price": 9.99, "at": "2024-01-02T03:04:05Z"}, null]}"""
    )
    assert NESTED.coerce(document) == (
        ["a", None, "c"],
        [1, 2, 3],
        {"k": "v", "n": None},
        {date(2024, 1, 2): Decimal("1.50"), date(2024, 1, 3): Decimal("2.00")},
        {"street": "Main", "zip": 12345, "geo": {"lat": 1.0, "lon": 2.5}},
        [
            {
                "sku": "a",
                "price": Decimal("9.99"),
                "at": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
            },
            None,
        ],
    )


def test_nested_values_from_json_text_as_in_a_hash() -> None:
    hash_fields = {
        "tags": b'["x","y"]',
        "attrs": b'{"a":"1"}',
        "address": b'{"zip": 1, "geo": null}',
        "items": b'[{"price": 12345678.125000000000001}]',
    }
    tags, _, attrs, _, address, items = NESTED.coerce(hash_fields)
    assert tags == ["x", "y"]
    assert attrs == {"a": "1"}
    assert address == {"street": None, "zip": 1, "geo": None}
    # a nested JSON text holding a decimal is read with exact decimals: no float rounding
    assert items == [{"sku": None, "price": Decimal("12345678.13"), "at": None}]


@pytest.mark.parametrize(
    ("document", "field", "value", "message"),
    [
        ({"tags": "a,b"}, "tags", "a,b", "field 'tags': cannot read 'a,b' as array<string>"),
        ({"tags": {"a": 1}}, "tags", {"a": 1}, "as array<string>"),
        ({"scores": [1, "two"]}, "scores[1]", "two", "field 'scores[1]': cannot read 'two' as int"),
        ({"attrs": [1]}, "attrs", [1], "field 'attrs': cannot read [1] as map<string,string>"),
        (
            {"attrs": {"k": [1]}},
            "attrs['k']",
            [1],
            "field \"attrs['k']\": cannot read [1] as string",
        ),
        ({"by_day": {"someday": 1}}, "by_day['someday']", "someday", "as date"),
        ({"address": {"street": "x"}}, "address.zip", None, "cannot read None as int NOT NULL"),
        (
            {"address": {"zip": 1, "geo": {"lat": "north"}}},
            "address.geo.lat",
            "north",
            "field 'address.geo.lat': cannot read 'north' as double",
        ),
        ({"items": [{}, {"price": "1e9"}]}, "items[1].price", "1e9", "as decimal(10,2)"),
        ({"items": [{"at": "soon"}]}, "items[0].at", "soon", "as timestamp"),
        (
            {"address": b"{not json"},
            "address",
            b"{not json",
            "field 'address': cannot read b'{not json' as struct<",
        ),
    ],
)
def test_bad_nested_values_name_the_path(
    document: dict[str, Any], field: str, value: Any, message: str
) -> None:
    with pytest.raises(DecodeError) as info:
        NESTED.coerce(document)
    assert info.value.field == field
    assert info.value.value == value
    assert message in str(info.value)


def test_not_null_top_level_fields() -> None:
    schema = Schema.of("id bigint NOT NULL, name string")
    assert schema.coerce({"id": "7"}) == (7, None)
    with pytest.raises(
        DecodeError, match="field 'id': missing or null, but declared bigint NOT NULL"
    ):
        schema.coerce({"name": "x"})


def test_long_values_are_shortened_in_messages() -> None:
    raw = "x" * 10_000
    with pytest.raises(DecodeError) as info:
        one("int", raw)
    assert len(str(info.value)) < 120
    assert info.value.value == raw  # the whole value stays on the error


def test_json_floats_keep_every_digit_for_decimal_schemas() -> None:
    text = b'{"price": 12345678901234567.89, "ratio": 0.1}'
    exact = Schema.of("price decimal(19,2), ratio double")
    assert exact.coerce(exact.loads(text)) == (Decimal("12345678901234567.89"), 0.1)
    plain = Schema.of("ratio double")
    assert plain.loads(text)["price"] == 12345678901234567.89  # a float: fast parser
    assert type(plain.loads(text)["price"]) is float


def test_values_already_of_the_type_pass() -> None:
    schema = Schema.of("at timestamp, d date, p decimal(5,2), t array<int>")
    at = datetime(2024, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    assert schema.coerce({"at": at, "d": date(2024, 1, 1), "p": Decimal("1.5"), "t": (1, 2)}) == (
        datetime(2024, 1, 1, tzinfo=UTC),
        date(2024, 1, 1),
        Decimal("1.50"),
        [1, 2],
    )
