"""What results become (enrich/maps/results.py): rows in returns' order, a row's error
for a value that does not fit, named by field, type and value; no row lost."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from enrich import DecodeError
from enrich.engine.records.call_metrics import JoinMetrics
from enrich.engine.records.failure import Failed
from enrich.maps.map_settings import MapSettings
from enrich.maps.results import Assembler

RETURNS = "score double, label string"


def assemble(outputs: list[tuple[int, Any]], policy: str = "error_column") -> Any:
    metrics = JoinMetrics()
    assembler = Assembler(MapSettings(returns=RETURNS, on_error=policy), metrics, "m")
    return assembler, assembler.rows(outputs), metrics


def test_a_dict_a_list_none_and_an_empty_list() -> None:
    _, rows, metrics = assemble(
        [
            (0, {"score": 1, "label": "a", "extra": "ignored"}),
            (1, [{"score": 2.5}, {"label": "b"}]),
            (2, []),
            (3, None),
        ]
    )
    assert rows.positions == [0, 1, 1, 3]
    assert rows.values == [(1.0, "a"), (2.5, None), (None, "b"), None]
    assert rows.errors == [None, None, None, None]
    assert (metrics.rows_out, metrics.misses) == (4, 1)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"score": "high"}, "field 'score': cannot read 'high' as double"),
        ({"score": True}, "field 'score': cannot read True as double"),
        ([{"score": 1.0}, "nope"], "the function returned str 'nope': expected a dict"),
        (42, "the function returned int 42: expected a dict"),
    ],
)
def test_a_value_that_does_not_fit_is_that_rows_error(value: Any, message: str) -> None:
    _, rows, metrics = assemble([(0, {"score": 1.0}), (1, value), (2, {"score": 3.0})])
    assert rows.positions == [0, 1, 2]
    assert rows.values == [(1.0, None), None, (3.0, None)]
    assert rows.errors is not None and rows.errors[0] is None and rows.errors[2] is None
    assert rows.errors[1].startswith(f"decode: {message}")
    assert metrics.errors == {"decode": 1}


def test_under_fail_a_bad_value_names_the_map_field_and_value() -> None:
    with pytest.raises(DecodeError) as info:
        assemble([(0, {"score": "high"})], policy="fail")
    text = str(info.value)
    assert "m: the function's result for a row does not fit returns" in text
    assert "field 'score': cannot read 'high' as double" in text
    assert info.value.field == "score"


def test_failed_rows_follow_the_policy() -> None:
    failed = (1, Failed(TimeoutError("slow")))
    _, rows, _ = assemble([(0, {"score": 1.0}), failed], policy="null")
    assert (rows.positions, rows.values, rows.errors) == ([0, 1], [(1.0, None), None], None)
    _, rows, _ = assemble([(0, {"score": 1.0}), failed], policy="drop")
    assert rows.positions == [0]
    _, rows, _ = assemble([(0, {"score": 1.0}), failed], policy="error_column")
    assert rows.errors == [None, "TimeoutError: slow"]


def test_columns_take_every_type_returns_names() -> None:
    settings = MapSettings(
        returns="n int, ts timestamp, d date, price decimal(10,2), tags array<string>, "
        "who struct<name: string, age: int>, attrs map<string,string>, raw binary"
    )
    assembler = Assembler(settings, JoinMetrics(), "m")
    value = {
        "n": 7,
        "ts": "2024-05-01T10:00:00Z",
        "d": dt.date(2024, 5, 1),
        "price": Decimal("12.30"),
        "tags": ["a", "b"],
        "who": {"name": "Ada", "age": 36},
        "attrs": {"k": "v"},
        "raw": b"\x00\x01",
    }
    rows = assembler.rows([(0, value), (1, None)])
    columns = assembler.columns(rows)
    table = pa.Table.from_arrays(columns, names=list(settings.returns.names))
    first, second = table.to_pylist()
    assert first["ts"] == dt.datetime(2024, 5, 1, 10, tzinfo=dt.timezone.utc)
    assert first["price"] == Decimal("12.30") and first["who"] == {"name": "Ada", "age": 36}
    assert first["attrs"] == [("k", "v")] and first["raw"] == b"\x00\x01"
    assert set(second.values()) == {None}


def test_settings_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="returns must name the fields"):
        MapSettings(returns="")
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        MapSettings(returns=RETURNS, batch_size=0)
    with pytest.raises(ValueError, match="concurrency must be None, an int >= 1 or 'auto'"):
        MapSettings(returns=RETURNS, concurrency="fast")
    with pytest.raises(ValueError, match="on_error must be one of"):
        MapSettings(returns=RETURNS, on_error="ignore")
    with pytest.raises(ValueError, match="job_rate_limit must be a JobRateLimit with the Redis"):
        MapSettings(returns=RETURNS, job_rate_limit=100)  # type: ignore[arg-type]
