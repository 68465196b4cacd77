"""The real-time benchmark's ``foreach`` writer, called as Spark's worker calls it (open,
process each row, close) against a real Redis: each row joined with its user, each
Kafka record written once across a replay, per partition. No JVM: a smoke test of the
benchmark's code, not a timing."""

from __future__ import annotations

import json
from collections import namedtuple
from typing import Any

import pytest

from benchmarks._realtime_writer import FIELDS, JoinWriter
from enrich.demo.dimension_service import user

pytestmark = pytest.mark.timeout(60)

Row = namedtuple("Row", "order_id ts user_id topic partition offset")
MISSING = {3, 17}  # orders whose user is not in Redis


def rows(partition: int, offsets: range) -> list[Row]:
    """Orders ``2 * offset + partition``: two partitions' records, as Kafka hands them."""
    out = []
    for offset in offsets:
        order = 2 * offset + partition
        out.append(Row(order, 1_000 + order, order * 7919 % 100_000, "orders", partition, offset))
    return out


def write(url: str, stream: str, batch: list[Row], *, join: bool = True) -> None:
    writer = JoinWriter(url, stream, join=join)
    assert writer.open(0, 0)
    for row in batch:
        writer.process(row)
    writer.close(None)


def entries(client: Any, stream: str) -> dict[int, dict[str, str]]:
    out: dict[int, dict[str, str]] = {}
    for _, fields in client.xrange(stream):
        entry = {k.decode(): v.decode() for k, v in fields.items()}
        assert int(entry["order_id"]) not in out, f"written twice: {entry}"
        out[int(entry["order_id"])] = entry
    return out


def test_each_record_is_joined_and_written_once_across_a_replay(
    redis_client: Any, redis_server: Any
) -> None:
    for order in range(60):
        if order not in MISSING:
            uid = order * 7919 % 100_000
            redis_client.set(f"user:{uid}", json.dumps(user(uid)))

    write(redis_server.url, "out", rows(0, range(20)) + rows(1, range(10)))
    # a replay from earlier offsets, further on: only the records above each mark are new
    write(redis_server.url, "out", rows(1, range(5, 30)) + rows(0, range(15, 30)))

    got = entries(redis_client, "out")
    assert sorted(got) == list(range(60))
    for order, entry in got.items():
        assert set(entry) == set(FIELDS)
        assert entry["ts"] == str(1_000 + order)
        name = "" if order in MISSING else user(order * 7919 % 100_000)["name"]
        assert entry["name"] == name
    assert redis_client.hgetall("out:marks") == {b"orders/0": b"29", b"orders/1": b"29"}


def test_the_handover_writer_writes_the_rows_unjoined(redis_client: Any, redis_server: Any) -> None:
    write(redis_server.url, "bare", rows(0, range(5)), join=False)

    got = entries(redis_client, "bare")
    assert sorted(got) == [0, 2, 4, 6, 8]
    assert {e["name"] for e in got.values()} == {""}
