"""The executor side of Spark lookups, without a JVM: Arrow batches through the engine."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from enrich import JoinMetrics, OutputMode
from enrich.lookup.join_settings import JoinSettings
from enrich.lookup.lane.run import ColumnarLane
from enrich.spark.join.join_batches import JoinPlan, enrich_batches, lookup_structs
from enrich.testing import FakeSource

pytestmark = pytest.mark.timeout(30)


class ListAccumulator:
    def __init__(self) -> None:
        self.added: list[dict[Any, JoinMetrics]] = []

    def add(self, value: dict[Any, JoinMetrics]) -> None:
        self.added.append(value)


def plan(
    source: FakeSource, on: tuple[int, ...] = (0,), accumulator: Any = None, **settings: Any
) -> JoinPlan:
    return JoinPlan(
        name="t",
        source=source,
        on=on,
        columns=tuple(source.schema.names),
        settings=JoinSettings(**settings),
        accumulator=accumulator,
    )


def batch(keys: list[Any], **more: list[Any]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"k": keys, **more})


def rows(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [row for b in batches for row in b.to_pylist()]


def test_an_empty_partition_yields_nothing_and_never_asks_the_source() -> None:
    source = FakeSource({"a": ("A",)})
    accumulator = ListAccumulator()
    out = list(enrich_batches(plan(source, accumulator=accumulator), iter([])))
    empty = list(enrich_batches(plan(source), iter([batch([])])))
    assert out == [] and empty == []
    assert source.requests == [] and accumulator.added == []


def test_left_join_keeps_order_misses_nulls_and_one_to_many() -> None:
    source = FakeSource({"a": ("A",), "b": [("B1",), ("B2",)]})
    inputs = [batch(["a", None, "x", "b"], n=[0, 1, 2, 3]), batch(["b", "a"], n=[4, 5])]
    out = list(enrich_batches(plan(source, capacity=8), iter(inputs)))
    assert rows(out) == [
        {"k": "a", "n": 0, "value": "A"},
        {"k": None, "n": 1, "value": None},
        {"k": "x", "n": 2, "value": None},
        {"k": "b", "n": 3, "value": "B1"},
        {"k": "b", "n": 3, "value": "B2"},
        {"k": "b", "n": 4, "value": "B1"},
        {"k": "b", "n": 4, "value": "B2"},
        {"k": "a", "n": 5, "value": "A"},
    ]
    assert all(b.schema.names == ["k", "n", "value"] for b in out)


def test_outputs_are_pipelined_one_batch_per_chunk() -> None:
    source = FakeSource({i: (str(i),) for i in range(100)})
    # capacity 8 -> chunks of 2 rows: a 100-row batch comes back as 50 output batches.
    out = list(enrich_batches(plan(source, capacity=8), iter([batch(list(range(100)))])))
    assert len(out) == 50
    assert [r["value"] for r in rows(out)] == [str(i) for i in range(100)]


def test_inner_join_drop_and_error_column() -> None:
    source = FakeSource({"a": ("A",), "bad": ValueError("broken")})
    inputs = [batch(["a", "x", "bad", None])]
    inner = rows(list(enrich_batches(plan(source, how="inner", on_error="drop"), iter(inputs))))
    assert inner == [{"k": "a", "value": "A"}]
    with_reason = rows(
        list(
            enrich_batches(plan(source, on_error="error_column", error_column="why"), iter(inputs))
        )
    )
    assert [r["why"] for r in with_reason] == [None, None, "ValueError: broken", None]


def test_composite_keys_with_a_null_part_find_nothing() -> None:
    source = FakeSource({("eu", 1): ("EU1",)})
    inputs = [batch(["eu", "eu", None], n=[1, 2, 1])]
    out = rows(list(enrich_batches(plan(source, on=(0, 1)), iter(inputs))))
    assert [r["value"] for r in out] == ["EU1", None, None]
    assert sorted(k for call in source.requests for k in call) == [("eu", 1), ("eu", 2)]


def test_unordered_mode_yields_every_row() -> None:
    source = FakeSource({i: (str(i),) for i in range(0, 50, 2)})
    out = enrich_batches(
        plan(source, mode=OutputMode.UNORDERED, capacity=8), iter([batch(list(range(50)))])
    )
    got = sorted((r["k"], r["value"]) for r in rows(list(out)))
    assert got == [(i, str(i) if i % 2 == 0 else None) for i in range(50)]


def test_the_task_adds_its_metrics_once() -> None:
    source = FakeSource({"a": ("A",)})
    accumulator = ListAccumulator()
    list(enrich_batches(plan(source, accumulator=accumulator), iter([batch(["a", "a", "x"])])))
    [added] = accumulator.added
    metrics = added[("t", None, None)]
    assert metrics.rows_in == 3 and metrics.rows_out == 3 and metrics.misses == 1


def test_sql_structs_line_up_with_their_batches() -> None:
    source = FakeSource({"a": ("A",), "b": [("B1",), ("B2",)]})
    p = plan(source, capacity=4)  # chunks of one row
    inputs = [pa.array(["a", None, "x"]), pa.array([], pa.string()), pa.array(["b"])]
    out = list(lookup_structs(p, iter(inputs)))
    assert [a.to_pylist() for a in out] == [
        [{"value": "A"}, None, None],
        [],
        [{"value": "B1"}],
    ]


def test_sql_structs_carry_the_reason_and_composite_keys() -> None:
    source = FakeSource({("a", 1): ("A",), ("b", 2): ValueError("no")})
    p = plan(source, on_error="error_column")
    out = list(lookup_structs(p, iter([(pa.array(["a", "b", "c"]), pa.array([1, 2, 3]))])))
    assert out[0].to_pylist() == [
        {"value": "A", "enrich_error": None},
        {"value": None, "enrich_error": "ValueError: no"},
        None,
    ]


@pytest.mark.parametrize("how", ["left", "inner"])
@pytest.mark.parametrize("policy", ["null", "drop", "error_column"])
def test_the_columnar_lane_gives_the_per_row_paths_batches(how: str, policy: str) -> None:
    from enrich import LookupFailed
    from enrich.testing import ColumnarFakeSource

    data = {
        "a": ("A",),
        "b": [("B1",), ("B2",)],  # 1:N
        "c": LookupFailed("scripted", key="c", kind="status:500", retryable=False),
        "d": None,
    }
    keys = ["a", None, "b", "zz", "a", "c", "d", "a"] * 5
    inputs = [batch(keys, n=list(range(len(keys)))), batch(["a", "zz"] * 9, n=list(range(18)))]
    settings: dict[str, Any] = {"how": how, "on_error": policy, "capacity": 16}
    lane = ColumnarFakeSource(data)
    per_row = FakeSource(data)
    assert isinstance(plan(lane, **settings).engine([inputs[0].column(0)]), ColumnarLane)
    assert not isinstance(plan(per_row, **settings).engine([inputs[0].column(0)]), ColumnarLane)
    got = rows(list(enrich_batches(plan(lane, **settings), iter(inputs))))
    expected = rows(list(enrich_batches(plan(per_row, **settings), iter(inputs))))
    assert got == expected and got


def test_the_columnar_lane_reports_its_metrics_and_keeps_capacity() -> None:
    from enrich.testing import ColumnarFakeSource

    source = ColumnarFakeSource({k: (k.upper(),) for k in "abcdefgh"})
    accumulator = ListAccumulator()
    keys = [*"abcdefghij", None] * 20
    out = list(
        enrich_batches(
            plan(source, capacity=8, max_batch=3, accumulator=accumulator), iter([batch(keys)])
        )
    )
    assert [r["value"] for r in rows(out)] == [k.upper() if k and k < "i" else None for k in keys]
    assert max(map(len, source.requests)) <= 3
    assert source.max_in_flight <= 8  # at most capacity rows: calls of at least one key
    (metrics,) = accumulator.added[0].values()
    assert (metrics.rows_in, metrics.rows_out, metrics.null_keys) == (220, 220, 20)
    assert metrics.misses == 40


@pytest.mark.parametrize("wrap", [False, True])
def test_the_sql_function_takes_the_columnar_lane(wrap: bool) -> None:
    from enrich.testing import ColumnarFakeSource

    data = {"a": ("A",), "b": [("B1",), ("B2",)]}
    keys = [pa.array(["a", None, "b", "zz"]), pa.array([], pa.string()), pa.array(["a"] * 5)]
    inputs = [(k,) if wrap else k for k in keys]
    lane_plan = plan(ColumnarFakeSource(data), on=(), capacity=8)
    assert isinstance(lane_plan.engine([keys[0]]), ColumnarLane)
    got = [a.to_pylist() for a in lookup_structs(lane_plan, iter(inputs))]
    expected = [
        a.to_pylist()
        for a in lookup_structs(plan(FakeSource(data), on=(), capacity=8), iter(inputs))
    ]
    assert got == expected
    assert got[0] == [{"value": "A"}, None, {"value": "B1"}, None] and got[1] == []


def test_the_columnar_lane_decodes_by_field_names_whatever_the_prefix(
    redis_server: Any, redis_client: Any
) -> None:
    from connectors.redis import RedisLookup

    redis_client.set("user:1", '{"name": "Ada", "credit": 2.5}')
    source = RedisLookup(
        redis_server.url, key_template="user:{}", value="json", schema="name string, credit double"
    )
    prefixed = JoinPlan(
        name="t", source=source, on=(0,), columns=("u_name", "u_credit"), settings=JoinSettings()
    )
    keys = pa.RecordBatch.from_pydict({"k": pa.array([1, 2, None], pa.int8())})
    assert isinstance(prefixed.engine([keys.column(0)]), ColumnarLane)
    out = rows(list(enrich_batches(prefixed, iter([keys]))))
    assert out == [
        {"k": 1, "u_name": "Ada", "u_credit": 2.5},
        {"k": 2, "u_name": None, "u_credit": None},
        {"k": None, "u_name": None, "u_credit": None},
    ]
