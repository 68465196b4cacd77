"""The idempotent writes (``mode=idempotent``) against a real Redis, without Spark: what
the columnar path writes reads back exactly by the lookup's rules, equals what the row
path writes, goes out a ``MULTI`` per chunk, and bad data fails with what is wrong."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
import redis
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructField, StructType

from enrich import Schema
from enrich.spark.sink.redis import direct
from enrich.spark.sink.redis.row_writes import RowEncoder, SinkSettings
from enrich.spark.spark_types import spark_type
from tests.support.redis_fixtures import tls_redis

from .sink_values import canon
from .test_sink_columns import _plain
from .test_sink_roundtrip import _EVERY_TYPE, _every_type_rows

__all__ = ("tls_redis",)  # a fixture this module uses

ORDERS = "id long, name string, amount double"


def _schema(ddl: str) -> StructType:
    """The Spark schema of DDL text (parsed without a JVM)."""
    return StructType([StructField(f.name, spark_type(f.type)) for f in Schema.of(ddl).fields])


def _batch(schema: StructType, rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    arrow = to_arrow_schema(schema, timezone="UTC")
    columns = [pa.array([_plain(r[i]) for r in rows], f.type) for i, f in enumerate(arrow)]
    return pa.RecordBatch.from_arrays(columns, schema=arrow)


def _write(client: redis.Redis, schema: StructType, items: list[Any], **target: str) -> int:
    settings = SinkSettings.of({"url": "redis://unused", "mode": "idempotent", **target})
    return direct.write(client, RowEncoder(settings, schema), iter(items), None)


def _entries(client: redis.Redis, stream: str) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in client.xrange(stream)]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(direct, "CHUNK_ROWS", 3)
    yield


def test_every_type_reads_back_exactly_by_the_lookups_rules(redis_client: redis.Redis) -> None:
    schema, rows = _schema(_EVERY_TYPE), _every_type_rows()
    batch = _batch(schema, rows)
    for target in ({"key": "h:{k}"}, {"key": "j:{k}", "value": "json"}, {"stream": "s"}):
        assert _write(redis_client, schema, [batch], **target) == len(rows)
    rules = Schema.of(_EVERY_TYPE)
    entries = _entries(redis_client, "s")
    for row, entry in zip(rows, entries, strict=True):
        expected = canon(list(row))
        document = rules.loads(redis_client.get(f"j:{row[0]}"))
        for read in (redis_client.hgetall(f"h:{row[0]}"), entry):
            assert canon(list(rules.coerce({k.decode(): v for k, v in read.items()}))) == expected
        assert canon(list(rules.coerce(document))) == expected


def _contents(client: redis.Redis, prefix: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key in client.scan_iter(f"{prefix}*"):
        name, kind = key.decode()[len(prefix) :], client.type(key)
        if kind == b"hash":
            found[name] = client.hgetall(key)
        elif kind == b"stream":
            found[name] = _entries(client, key.decode())
        else:
            found[name] = client.get(key)
    return found


def test_the_columnar_and_the_row_path_write_the_same(
    redis_client: redis.Redis, small_chunks: None
) -> None:
    """Arrow batches (columnar) and the same rows as tuples (the row encoder's path),
    every type, a dead letter beside each target, chunks cut inside batches."""
    schema = _schema(_EVERY_TYPE + ", enrich_error string")
    good = [(*row, None) for row in _every_type_rows()]
    dead = [(10 + row[0], *row[1:-1], "timeout") for row in good]
    rows = [row for pair in zip(good, dead, strict=True) for row in pair]  # interleaved
    batches = [_batch(schema, rows[:4]), _batch(schema, rows[4:])]
    tuples = [row for b in batches for row in zip(*(c.to_pylist() for c in b.columns), strict=True)]
    for path, items in (("a", batches), ("b", tuples)):
        for target in ({"key": f"{path}:h:{{k}}"}, {"key": f"{path}:j:{{k}}", "value": "json"}):
            _write(redis_client, schema, items, dead_letter=f"{path}:dead", **target)
        _write(redis_client, schema, items, stream=f"{path}:s", dead_letter=f"{path}:dead")
    columnar, by_row = _contents(redis_client, "a:"), _contents(redis_client, "b:")
    assert len(columnar["dead"]) == 3 * len(dead)  # from each of the three targets
    assert len(columnar["s"]) == len(good)
    assert len(columnar) == 2 + 2 * len(good)  # dead, s, the hashes and the JSON values
    assert columnar == by_row


def test_a_hash_is_replaced_whole_a_multi_per_chunk(
    redis_client: redis.Redis, small_chunks: None
) -> None:
    schema = _schema(ORDERS)
    redis_client.hset("o:1", mapping={"stale": "x", "name": "old"})
    redis_client.config_resetstat()
    first = _batch(schema, [(1, None, 1.5), (2, "b", 2.0), (3, "c", 3.25)])
    second = _batch(schema, [(4, "d", 4.0), (5, "e", -0.0), (6, "f", 1e-7), (7, "g", 7.0)])
    assert _write(redis_client, schema, [first, second], key="o:{id}") == 7
    assert redis_client.hgetall("o:1") == {b"id": b"1", b"amount": b"1.5"}  # replaced whole
    assert redis_client.hgetall("o:6") == {b"id": b"6", b"name": b"f", b"amount": b"1e-07"}
    stats = redis_client.info("commandstats")
    # Chunks of 3 rows, cut inside each batch: [1-3], [4-6], [7].
    assert stats["cmdstat_multi"]["calls"] == stats["cmdstat_exec"]["calls"] == 3
    assert stats["cmdstat_del"]["calls"] == stats["cmdstat_hset"]["calls"] == 7


def test_entries_keep_the_rows_order_across_chunks_batches_and_row_input(
    redis_client: redis.Redis, small_chunks: None
) -> None:
    schema = _schema(ORDERS)
    batches = [_batch(schema, [(i, f"n{i}", None) for i in range(s, s + 5)]) for s in (0, 5)]
    items = [*batches, (10, "n10", None), (11, None, None)]  # Row-like tuples go row by row
    assert _write(redis_client, schema, items, stream="out") == 12
    entries = _entries(redis_client, "out")
    assert [e[b"id"] for e in entries] == [str(i).encode() for i in range(12)]
    assert entries[-1] == {b"id": b"11"}


def test_a_null_key_fails_naming_the_column_and_the_row(redis_client: redis.Redis) -> None:
    schema = _schema(ORDERS)
    good = _batch(schema, [(1, "a", 1.0)])
    bad = _batch(schema, [(2, "b", 2.0), (None, "c", 3.0)])
    with pytest.raises(ValueError, match="key column 'id' is null") as raised:
        _write(redis_client, schema, [good, bad], key="o:{id}")
    assert "{'id': None, 'name': 'c', 'amount': 3.0}" in str(raised.value)
    # The batch holding the bad row is refused whole, before any of it is sent.
    assert sorted(redis_client.keys("o:*")) == [b"o:1"]


def test_a_command_redis_refuses_is_named_and_the_connection_stays_usable(
    redis_client: redis.Redis,
) -> None:
    schema = _schema(ORDERS + ", enrich_error string")
    redis_client.set("dlq", "not a stream")
    rows = [(1, "a", 1.0, None), (2, "b", 2.0, "timeout"), (3, "c", 3.0, None)]
    with pytest.raises(direct.WriteRefused) as refused:
        _write(redis_client, schema, [_batch(schema, rows)], key="o:{id}", dead_letter="dlq")
    assert (refused.value.command, refused.value.key) == ("XADD", "dlq")
    assert "WRONGTYPE" in str(refused.value)
    # Redis ran the chunk's other commands (a MULTI is not rolled back).
    assert sorted(redis_client.keys("o:*")) == [b"o:1", b"o:3"]
    redis_client.delete("dlq")
    assert _write(redis_client, schema, [_batch(schema, rows)], stream="s") == 3


def test_writes_over_tls(tls_redis: Any) -> None:
    client = redis.Redis(
        host=tls_redis.host, port=tls_redis.port, ssl=True, ssl_ca_certs=str(tls_redis.ca_file)
    )
    schema = _schema(ORDERS)
    rows = [(i, "x" * 5000, float(i)) for i in range(40)]  # replies spread over reads
    assert _write(client, schema, [_batch(schema, rows)], key="t:{id}") == 40
    assert client.hget("t:39", "amount") == b"39.0"
    client.close()
