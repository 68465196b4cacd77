"""One settings object for a lookup join: validated once, naming the setting and the value
at every entry point; chunk sizes derived from it; picklable and frozen."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
import re
from collections.abc import Callable
from typing import Any

import pytest

from enrich import (
    FixedDelayRetry,
    LookupCache,
    LookupJoin,
    OutputMode,
    chunk_rows,
    lookup_chunks,
    lookup_chunks_async,
    lookup_rows,
)
from enrich.lookup.join_settings import JoinSettings
from enrich.testing import FakeSource

# (setting, bad value, the message it must raise)
BAD_SETTINGS: list[tuple[str, Any, str]] = [
    ("how", "outer", "how must be one of ('left', 'inner'), got 'outer'"),
    ("how", None, "how must be one of ('left', 'inner'), got None"),
    ("on_error", "ignore", "on_error must be one of ('fail', 'null', 'drop', 'error_column')"),
    ("on_error", 5, "got 5"),
    ("mode", "sorted", "mode must be 'ordered' or 'unordered', got 'sorted'"),
    ("mode", 5, "mode must be 'ordered' or 'unordered', got 5"),
    ("capacity", 0, "capacity must be an int >= 1, got 0"),
    ("capacity", 2.5, "capacity must be an int >= 1, got 2.5"),
    ("capacity", True, "capacity must be an int >= 1, got True"),
    ("capacity", "100", "capacity must be an int >= 1, got '100'"),
    ("timeout", 0, "timeout must be a number > 0 or None, got 0"),
    ("timeout", -1.0, "timeout must be a number > 0 or None, got -1.0"),
    ("timeout", "1", "timeout must be a number > 0 or None, got '1'"),
    ("retry", 3, "retry must be a RetryStrategy or None, got 3"),
    ("cache", {"ttl": 60}, "cache must be a LookupCache, a FullCache or None, got {'ttl': 60}"),
    ("max_batch", 0, "max_batch must be an int >= 1, got 0"),
    ("max_batch", 1.5, "max_batch must be an int >= 1, got 1.5"),
    ("on", 5, "on must be a column name or a list of them, got 5"),
    ("on", [], "on must be a column name or a list of them, got []"),
    ("on", ["user_id", 7], "on must be a column name or a list of them, got ['user_id', 7]"),
    ("prefix", 5, "prefix must be a str, got 5"),
    ("error_column", "", "error_column must be a non-empty str, got ''"),
    ("error_column", 5, "error_column must be a non-empty str, got 5"),
]

# What leaked before settings were checked at every entry point.
LEAKS = ("unsupported operand", "not iterable", "not supported between", "object has no")

SOURCE = FakeSource({1: ("ann",)})


def _rows(**settings: Any) -> Any:
    settings.setdefault("on", "user_id")
    return lookup_rows([{"user_id": 1}], SOURCE, **settings)


def _chunks_async(**settings: Any) -> Any:
    async def build() -> Any:
        return lookup_chunks_async([("c", [1])], SOURCE, **settings)

    return asyncio.run(build())


ENTRY_POINTS: dict[str, tuple[Callable[..., Any], set[str]]] = {
    "lookup_rows": (
        _rows,
        {"how", "on_error", "mode", "capacity", "timeout", "retry", "cache", "max_batch"}
        | {"on", "prefix", "error_column"},
    ),
    "lookup_chunks": (
        lambda **s: lookup_chunks([("c", [1])], SOURCE, **s),
        {"how", "on_error", "mode", "capacity", "timeout", "retry", "cache", "max_batch"},
    ),
    "lookup_chunks_async": (
        _chunks_async,
        {"how", "on_error", "mode", "capacity", "timeout", "retry", "cache", "max_batch"},
    ),
    "LookupJoin": (
        lambda **s: LookupJoin(SOURCE, **s),
        {"how", "on_error", "timeout", "retry", "cache", "max_batch"},
    ),
    "JoinSettings": (
        lambda **s: JoinSettings(**s),
        {"how", "on_error", "mode", "capacity", "timeout", "retry", "cache", "max_batch"}
        | {"on", "prefix", "error_column"},
    ),
}

CASES = [
    pytest.param(entry, setting, value, message, id=f"{entry}-{setting}={value!r}")
    for entry, (_, accepted) in ENTRY_POINTS.items()
    for setting, value, message in BAD_SETTINGS
    if setting in accepted
]


@pytest.mark.parametrize(("entry", "setting", "value", "message"), CASES)
def test_every_entry_point_names_the_bad_setting_and_its_value(
    entry: str, setting: str, value: Any, message: str
) -> None:
    call, _ = ENTRY_POINTS[entry]
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        call(**{setting: value})  # raises on the call itself, before any row is read
    assert not any(leak in str(raised.value) for leak in LEAKS)


def test_lookup_rows_needs_an_on_field() -> None:
    with pytest.raises(ValueError, match=re.escape("on must be a column name or a list")):
        lookup_rows([{"user_id": 1}], SOURCE, on=None)  # type: ignore[arg-type]


def test_defaults_and_the_accepted_forms() -> None:
    settings = JoinSettings()
    assert (settings.how, settings.on_error, settings.mode) == ("left", "fail", OutputMode.ORDERED)
    assert (settings.capacity, settings.timeout, settings.max_batch) == (100, 10.0, 500)
    assert (settings.retry, settings.cache, settings.on) == (None, None, ())
    assert JoinSettings(mode="UNORDERED").mode is OutputMode.UNORDERED
    assert JoinSettings(on="user_id").on == ("user_id",)
    assert JoinSettings(on=["region", "no"]).on == ("region", "no")
    assert JoinSettings(timeout=None).timeout is None


@pytest.mark.parametrize(
    ("capacity", "rows"), [(1, 1), (3, 1), (4, 1), (10, 2), (100, 25), (256, 64), (1001, 250)]
)
def test_chunk_sizes_are_derived_and_capacity_stays_in_rows(capacity: int, rows: int) -> None:
    settings = JoinSettings(capacity=capacity)
    assert settings.chunk_rows == rows == chunk_rows(capacity)
    operator = settings.operator()
    assert operator.capacity == capacity  # chunks weigh their rows: the unit stays rows
    assert (operator.mode, operator.timeout, operator.retry) == (settings.mode, 10.0, None)


def test_capacity_bounds_the_rows_in_flight_of_a_run() -> None:
    source = FakeSource({k: (str(k),) for k in range(100)}, latency=0.01)
    chunks = [(n, list(range(n * 2, n * 2 + 2))) for n in range(40)]
    it = lookup_chunks(chunks, source, capacity=10)
    assert sum(len(chunk.indices) for chunk in it) == 80
    # The operator counts chunks (two rows each here): at most five, ten rows, in flight.
    assert 4 <= it.statistics().peak_in_flight <= 5


def test_settings_are_frozen_keyword_only_and_travel_whole() -> None:
    settings = JoinSettings(
        how="inner",
        on_error="error_column",
        mode="unordered",
        capacity=64,
        timeout=2.5,
        retry=FixedDelayRetry(3, 0.1),
        cache=LookupCache(max_rows=10, ttl=5),
        max_batch=50,
        on=("a", "b"),
        prefix="d_",
        error_column="why",
    )
    copy = pickle.loads(pickle.dumps(settings))
    assert copy == settings
    assert (copy.chunk_rows, copy.with_error) == (16, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.capacity = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        JoinSettings("left")  # type: ignore[misc]
    changed = dataclasses.replace(settings, capacity=8)
    assert (changed.capacity, changed.chunk_rows, changed.on) == (8, 2, ("a", "b"))
    with pytest.raises(ValueError, match="capacity must be an int >= 1, got 0"):
        dataclasses.replace(settings, capacity=0)


def test_the_join_receives_the_settings_whole() -> None:
    settings = JoinSettings(how="inner", max_batch=7, timeout=None)
    join = LookupJoin.from_settings(SOURCE, settings)
    assert join.settings is settings
    assert (join.how, join.max_batch) == ("inner", 7)
    it = lookup_chunks([("c", [1])], SOURCE, how="inner", capacity=8, max_batch=7)
    assert it.function.settings == JoinSettings(how="inner", capacity=8, max_batch=7)
    assert [chunk.rows for chunk in it] == [[("ann",)]]


def test_the_operators_knobs_are_one_object_below_spark_that_travels_whole() -> None:
    from pathlib import Path

    import pyarrow as pa

    import enrich
    from enrich.engine.wait_settings import OperatorSettings
    from enrich.lookup.lane.run import ColumnarLane
    from enrich.maps.map_settings import MapSettings
    from enrich.testing import ColumnarFakeSource

    knobs = OperatorSettings(capacity=64, timeout=2.0, on_error="error_column")
    join = JoinSettings(knobs=knobs, how="inner")
    assert join.knobs is knobs and (join.capacity, join.timeout, join.with_error) == (64, 2.0, True)
    mapped = MapSettings(returns="x int", knobs=knobs)
    assert mapped.knobs is knobs and mapped.operator().capacity == 64
    # Keyword arguments go on top of the object; the entry point's default fills capacity.
    assert JoinSettings(knobs=knobs, timeout=1.0).knobs == dataclasses.replace(knobs, timeout=1.0)
    assert JoinSettings(knobs=OperatorSettings()).capacity == 100
    assert MapSettings(returns="x int", capacity=7).knobs.capacity == 7
    lane = ColumnarLane(ColumnarFakeSource({}), pa.struct([("v", pa.string())]), join)
    assert lane.settings is join and lane.capacity == 64
    # A lookup takes no concurrency or job rate: its store sets its own.
    with pytest.raises(ValueError, match="a lookup join takes no concurrency"):
        JoinSettings(concurrency=4)
    # capacity is checked in one place, where the knobs are built.
    root = Path(enrich.__file__).parent
    checks = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        for _ in range(path.read_text().count('check_int("capacity"'))
    ]
    assert checks == ["engine/wait_settings.py"]
