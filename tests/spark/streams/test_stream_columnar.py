"""The redis-stream source's record batches hold exactly what its rows held: every page,
clean or not, against pyspark's own conversion of the row-by-row decoder's rows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import StructType

from enrich.spark import spark_type
from enrich.spark.streams.fields import EntryDecoder, MalformedEntry, Mode
from enrich.spark.streams.page_batches import PageBatches, arrow_conversion

records_to_arrow_batches = pytest.importorskip(
    "pyspark.sql.worker.plan_data_source_read"
).records_to_arrow_batches

ALL = (
    "stream_id string, s string, l long, i int, sh short, b byte, d double, f float, "
    "ok boolean, dec decimal(10,2), day date, at timestamp, raw binary, _corrupt_record string"
)
GOOD = {
    b"s": "née".encode(),
    b"l": b"-9223372036854775808",
    b"i": b"2147483647",
    b"sh": b"-7",
    b"b": b"127",
    b"d": b"-1.5e300",
    b"f": b"0.1",
    b"ok": b"Yes",
    b"dec": b"12.34",
    b"day": b"2024-05-01",
    b"at": b"2024-05-01T10:00:00.000001+02:00",
    b"raw": b"\x00\xff",
}


def schema_of(ddl: str) -> StructType:
    schema = spark_type(f"struct<{ddl.replace(' ', ':').replace(',:', ', ')}>")
    assert isinstance(schema, StructType)
    return schema


def page_of(*entries: dict[bytes, bytes] | list[bytes]) -> list[list[Any]]:
    """A raw XRANGE reply: ``[id, [field, value, ...]]`` per entry."""
    page = []
    for n, fields in enumerate(entries, 1):
        flat = [x for pair in fields.items() for x in pair] if isinstance(fields, dict) else fields
        page.append([f"{n}-0".encode(), flat])
    return page


class _Source:
    def name(self) -> str:
        return "redis-stream"


def check(ddl: str, page: list[list[Any]], mode: Mode = Mode.PERMISSIVE) -> pa.RecordBatch:
    """The batch of ``page`` equals pyspark's conversion of the rows the decoder makes of
    it entry by entry, and the decoders count the same."""
    schema = schema_of(ddl)
    conversion = arrow_conversion(schema)
    assert conversion is not None
    ours = EntryDecoder(schema, mode=mode, stream="orders")
    batch = PageBatches(ours, schema, conversion).batch(page)
    theirs = EntryDecoder(schema, mode=mode, stream="orders")
    rows = [theirs.row(i, dict(zip(f[0::2], f[1::2], strict=True))) for i, f in page]
    kept = iter([row for row in rows if row is not None])
    expected = list(records_to_arrow_batches(kept, 10_000, schema, _Source()))
    assert batch.schema == conversion[0]
    # repr: NaN equals NaN there
    assert repr(batch.to_pylist()) == repr([r for b in expected for r in b.to_pylist()])
    assert (ours.statistics(), ours.counts, ours.examples) == (
        theirs.statistics(),
        theirs.counts,
        theirs.examples,
    )
    return batch


def columnar_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any, page: Any) -> None:
        raise AssertionError("this page should not go row by row")

    monkeypatch.setattr(PageBatches, "_rows", refuse)


def test_a_clean_page_of_every_type_is_built_a_column_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    page = page_of(GOOD, {**GOOD, b"l": b"42", b"d": b"nan", b"ok": b"0"}, {**GOOD, b"d": b"inf"})
    columnar_only(monkeypatch)
    batch = check(ALL, page)
    assert batch.column("l").to_pylist() == [-(2**63), 42, -(2**63)]
    assert batch.column("_corrupt_record").null_count == 3


def test_a_field_no_entry_has_is_null_and_counted_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    columnar_only(monkeypatch)
    batch = check("stream_id string, l long, gone double", page_of({b"l": b"1"}, {b"l": b"2"}))
    assert batch.column("gone").null_count == 2


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("l", b"0x1F"),  # Arrow's cast reads hex; Python's int does not
        ("l", b"1.0"),
        ("b", b"128"),  # out of range for tinyint
        ("i", b"2147483648"),
        ("d", b"1,5"),
        ("s", b"\xff\xfe"),  # not UTF-8
        ("ok", b"maybe"),
        ("day", b"2024-02-30"),
    ],
)
@pytest.mark.parametrize("mode", [Mode.PERMISSIVE, Mode.DROPMALFORMED])
def test_a_malformed_value_makes_the_entry_malformed_as_row_by_row(
    column: str, value: bytes, mode: Mode
) -> None:
    batch = check(ALL, page_of(GOOD, {**GOOD, column.encode(): value}, GOOD), mode)
    assert batch.num_rows == (3 if mode is Mode.PERMISSIVE else 2)


def test_failfast_names_the_entry_as_row_by_row() -> None:
    page = page_of(GOOD, {**GOOD, b"l": b"0x1F"})
    with pytest.raises(MalformedEntry, match=r"id 2-0: field 'l' value '0x1F'"):
        check(ALL, page, Mode.FAILFAST)


@pytest.mark.parametrize("value", [b" 5", b"5 ", b"1_000", b"+5", b"007"])
def test_what_python_reads_as_an_integer_stays_an_integer(value: bytes) -> None:
    batch = check("stream_id string, l long, d double", page_of({b"l": value, b"d": value}))
    assert batch.column("l").to_pylist() == [int(value)]


def test_entries_of_other_shapes_read_as_row_by_row() -> None:
    check(
        "stream_id string, a long, b string",
        page_of(
            {b"a": b"1", b"b": b"x"},
            {b"b": b"y", b"a": b"2"},  # other order
            {b"a": b"3"},  # a field missing
            [b"a", b"4", b"b", b"z", b"a", b"5"],  # a field repeated: the last counts
            {b"a": b"6", b"b": b"w", b"c": b"extra"},
        ),
    )


def test_a_value_is_taken_by_its_field_name_not_its_place() -> None:
    swapped = check(
        "stream_id string, a long, b long",
        page_of({b"a": b"1", b"b": b"2"}, {b"b": b"3", b"a": b"4"}),
    )
    assert swapped.column("a").to_pylist() == [1, 4]
    repeated = check("stream_id string, a long", page_of([b"a", b"1"], [b"a", b"2", b"a", b"3"]))
    assert repeated.column("a").to_pylist() == [1, 3]


def test_a_repeated_field_in_every_entry_takes_the_last_value() -> None:
    batch = check(
        "stream_id string, a long", page_of([b"a", b"1", b"a", b"2"], [b"a", b"3", b"a", b"4"])
    )
    assert batch.column("a").to_pylist() == [2, 4]


def test_the_default_schema_keeps_every_field_in_a_map() -> None:
    batch = check("stream_id string, fields map<string,string>", page_of({b"a": b"1", b"b": b"2"}))
    assert batch.column("fields").to_pylist() == [[("a", "1"), ("b", "2")]]


def test_a_page_whose_entries_are_all_dropped_is_an_empty_batch() -> None:
    batch = check(
        "stream_id string, l long", page_of({b"l": b"x"}, {b"l": b"y"}), Mode.DROPMALFORMED
    )
    assert batch.num_rows == 0


def test_a_partition_is_read_from_redis_as_record_batches_a_page_each(
    redis_server: Any, redis_client: Any
) -> None:
    from enrich.spark.streams.read import PAGE
    from enrich.spark.streams.stream_source import RedisStreamBatchReader, StreamSettings

    pipe = redis_client.pipeline()
    for n in range(PAGE + 5):
        fields = {"order_id": n, "amount": f"{n}.5"} if n != 7 else {"order_id": "x"}
        pipe.xadd("orders", fields, id=f"{1000 + n}-0")
    pipe.execute()
    options = {"url": redis_server.url, "stream": "orders", "partitionsPerStream": "1"}
    settings = StreamSettings.of(options)
    reader = RedisStreamBatchReader(
        settings, schema_of("stream_id string, order_id long, amount double")
    )
    (part,) = reader.partitions()
    items = list(reader.read(part))
    assert [type(i) for i in items] == [pa.RecordBatch, pa.RecordBatch]
    assert [i.num_rows for i in items] == [PAGE, 5]
    rows = [r for i in items for r in i.to_pylist()]
    assert rows[7] == {"stream_id": "1007-0", "order_id": None, "amount": None}
    assert rows[8] == {"stream_id": "1008-0", "order_id": 8, "amount": 8.5}
    assert [r["stream_id"] for r in rows] == [f"{1000 + n}-0" for n in range(PAGE + 5)]


@pytest.mark.parametrize("clean", [True, False])
def test_stream_key_holds_the_stream_an_entry_was_read_from(clean: bool) -> None:
    """Both lanes (a clean page; a page with a malformed entry) give it, beside the id."""
    good = {b"l": b"1"}
    page = page_of(good, good if clean else {b"l": b"x"})
    batch = check("stream_id string, stream_key string, l long", page)
    assert batch.column("stream_key").to_pylist() == ["orders", "orders"]
    assert batch.column("stream_id").to_pylist() == ["1-0", "2-0"]


def test_stream_key_must_be_a_string() -> None:
    with pytest.raises(
        ValueError, match="'stream_key' holds the stream's key and must be a string"
    ):
        EntryDecoder(schema_of("stream_key long"), stream="orders")
