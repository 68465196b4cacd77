"""A change of a keyed sink's source streams under one checkpoint (one stream to
several, several to one, a stream renamed): the marks carry over, so nothing already
published goes out again and nothing new is skipped, or the query is refused at its
start (enrich.spark.sink.redis.two_phase.layout)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from enrich.spark.sink.redis import two_phase
from enrich.spark.sink.redis.data_source import RedisSinkDataSource
from enrich.spark.sink.redis.two_phase.layout import SourceLayoutChanged
from tests.spark.sink.test_sink_by_source import SCHEMA, entry_id, published, rows, run_batch

pytestmark = [pytest.mark.timeout(120)]


def start(server: Any, tmp_path: Path, streams: list[str], by_stream: bool) -> Any:
    """The sink as a query starts it: its options, then the stream writer (where the
    layout is checked); returns the settings its writer runs with."""
    options = {"url": server.url, "checkpointLocation": str(tmp_path / "ck"),
               "sourceIdColumn": "stream_id", "stream": "out",
               "sourceStreams": ",".join(streams)}  # fmt: skip
    if by_stream:
        options["sourceStreamColumn"] = "stream_key"
    sink = RedisSinkDataSource(options)
    sink.streamWriter(SCHEMA, False)
    return sink.settings


def by_stream(client: redis.Redis) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for _, fields in client.xrange("out"):
        out.setdefault(fields[b"stream_key"].decode(), []).append(int(fields[b"order_id"]))
    return {k: sorted(v) for k, v in out.items()}


def test_one_stream_to_several_and_back_neither_doubles_nor_loses(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    one = start(redis_server, tmp_path, ["orders"], by_stream=False)
    run_batch(one, monkeypatch, 0, [rows(list(range(0, 50)), "orders")])
    # Restarted reading two streams: the replay re-reads orders from an older offset.
    several = start(redis_server, tmp_path, ["orders", "returns"], by_stream=True)
    assert several.identity == one.identity
    run_batch(several, monkeypatch, 1, [rows(list(range(30, 80)), "orders"),
                                        rows(list(range(0, 20)), "returns")])  # fmt: skip
    assert by_stream(redis_client) == {"orders": list(range(80)), "returns": list(range(20))}
    marks = two_phase.published_marks(redis_client, one.identity)
    assert marks == {"orders": entry_id(79), "returns": entry_id(19)}
    # And back to one stream: its own mark becomes the one mark.
    again = start(redis_server, tmp_path, ["orders"], by_stream=False)
    run_batch(again, monkeypatch, 2, [rows(list(range(60, 100)), "orders")])
    assert by_stream(redis_client) == {"orders": list(range(100)), "returns": list(range(20))}
    assert sorted(published(redis_client, one)) == sorted([*range(100), *range(20)])


def test_a_stream_added_or_dropped_keeps_the_others_marks(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    two = start(redis_server, tmp_path, ["a", "b"], by_stream=True)
    run_batch(two, monkeypatch, 0, [rows(list(range(0, 10)), "a"), rows(list(range(0, 10)), "b")])
    three = start(redis_server, tmp_path, ["a", "b", "c"], by_stream=True)
    run_batch(three, monkeypatch, 1, [rows(list(range(5, 15)), "a"),
                                      rows(list(range(0, 5)), "c")])  # fmt: skip
    start(redis_server, tmp_path, ["a"], by_stream=True)
    assert by_stream(redis_client) == {"a": list(range(15)), "b": list(range(10)),
                                       "c": list(range(5))}  # fmt: skip


@pytest.mark.parametrize(
    ("before", "after", "message"),
    [
        ((["a", "b"], True), (["a", "c"], True), "'a', 'b'.*gone.*'c' appeared|'b' are gone"),
        ((["a"], False), (["b"], False), "its one stream was 'a', now 'b'"),
        ((["a"], False), (["b", "c"], True), "it read stream 'a', now 'b', 'c'"),
        ((["a", "b"], True), (["c"], False), "not one of them"),
        (([], False), ([], True), "whose name was not recorded"),
    ],
    ids=["renamed", "one replaced", "one to others", "several to another", "unnamed"],
)
def test_a_change_that_cannot_carry_over_is_refused_at_the_start(
    before: tuple[list[str], bool],
    after: tuple[list[str], bool],
    message: str,
    redis_server: Any,
    redis_client: redis.Redis,
    tmp_path: Path,
    monkeypatch: Any,
) -> None:
    first = start(redis_server, tmp_path, before[0], by_stream=before[1])
    run_batch(first, monkeypatch, 0, [rows(list(range(0, 10)), (before[0] or ["a"])[0])])
    marks = two_phase.published_marks(redis_client, first.identity)
    with pytest.raises(SourceLayoutChanged, match=message) as refused:
        start(redis_server, tmp_path, after[0], by_stream=after[1])
    assert "new checkpointLocation" in str(refused.value) and "\n" not in str(refused.value)
    assert two_phase.published_marks(redis_client, first.identity) == marks  # untouched
    assert redis_client.xlen("out") == 10
