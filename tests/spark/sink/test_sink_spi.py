"""The sink SPI (enrich.spark.sink.sink_spi): the one definition of exactly once keyed by
the source record, its options, columns, marks and what a replay skips (no Spark session)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from enrich.spark.sink import sink_spi as spi
from enrich.spark.streams import fields


def test_the_source_record_columns_are_the_redis_stream_sources_own() -> None:
    # The source and the sinks import nothing of each other: the names must agree.
    assert (spi.STREAM_ID, spi.STREAM_KEY) == (fields.ID_COLUMN, fields.KEY_COLUMN)
    assert spi.KEYED_SOURCES["redis-stream"] == (fields.ID_COLUMN,)


def test_the_options_are_parsed_once_whatever_their_case() -> None:
    assert spi.source_fields({}) is None
    named = spi.source_fields(
        {"sourceidcolumn": "offset", "SourceStreamColumn": "topic, partition"}
    )
    assert named == spi.SourceFields("offset", "topic,partition")
    assert named.partition == ("topic", "partition")
    with pytest.raises(spi.SourceNotKeyed, match="needs option sourceIdColumn"):
        spi.source_fields({"sourceStreamColumn": "stream_key"})
    with pytest.raises(ValueError, match="names a column twice"):
        spi.source_fields({"sourceIdColumn": "i", "sourceStreamColumn": "a,a"}, error=ValueError)


def test_a_replay_skips_what_the_mark_holds_and_the_mark_round_trips() -> None:
    columns = spi.resolve(None, {"stream_id": "string", "v": "bigint"}, sink="test")
    assert columns.partition == () and columns.kind is spi.IdKind.ENTRY_ID
    batch = pa.RecordBatch.from_pydict({"stream_id": ["5-0", "5-1", "7-0"], "v": [1, 2, 3]})
    [(partition, rows)] = spi.split(batch, columns, sink="test").items()
    assert partition == spi.ONE_STREAM
    kept, top = spi.unwritten(rows, columns, spi.parse_mark(spi.mark_text((5, 0))))
    assert kept.column("v").to_pylist() == [2, 3] and top == (7, 0)
    assert spi.higher(top, (5, 9)) == (7, 0) and spi.parse_mark(spi.mark_text(41)) == 41
