"""Joins against an HTTP batch endpoint take the columnar lane (no JVM: Arrow batches
through ``enrich.spark.join.join_batches``) and give the rows the per-row path gives."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from enrich.lookup.join_settings import JoinSettings
from enrich.lookup.lane.run import ColumnarLane
from enrich.spark.join.join_batches import JoinPlan, enrich_batches
from tests.integration.conftest import MakeHttp
from tests.spark.sources import RowByRow
from tests.support.http_server import BATCH_PATH, HttpTestServer

# A hang guard only; nothing here races a clock (see the test).
pytestmark = pytest.mark.timeout(180)

SCHEMA = "name string, age int, score double"


def plan(source: Any, **settings: Any) -> JoinPlan:
    return JoinPlan(
        name="http_lane",
        source=source,
        on=(0,),
        columns=tuple(source.schema.names),
        settings=JoinSettings(**settings),
    )


def rows(batches: Any) -> list[dict[str, Any]]:
    return [row for b in batches for row in b.to_pylist()]


@pytest.mark.parametrize("how", ["left", "inner"])
@pytest.mark.parametrize("policy", ["null", "drop", "error_column"])
def test_the_lane_over_the_batch_endpoint_gives_the_per_row_rows(
    http_server: HttpTestServer, make_http: MakeHttp, how: str, policy: str
) -> None:
    for i in range(300):
        if i % 10 == 0:
            continue  # a miss
        http_server.data[f"u{i}"] = {"name": f"n{i}", "age": i, "score": i / 4}
    http_server.data["u7"] = [{"name": "seven", "age": 7}, {"name": "sieben"}]  # 1:N
    http_server.data["u8"] = {"name": "eight", "age": "eight"}  # a decode error
    http_server.data["u9"] = {"name": "nine", "age": 9.5}  # a decode error (bulk: refused)
    http_server.raw["u11"] = b'{"name": "eleven", "name": "elf"}'  # duplicate: the last wins
    # No timeout can decide a row: the two paths must give the same rows, and a request
    # or a row timing out on a busy machine (the server shares this process) would turn a
    # hit into a null on one path only. So no per-row timeout, and a request timeout far
    # above what any request here takes; pytest-timeout guards against a hang.
    source = make_http(
        schema=SCHEMA, batch_url=http_server.url(BATCH_PATH), max_batch=40, timeout=120.0
    )
    keys = [f"u{(i * 7) % 320}" if i % 13 else None for i in range(1000)]
    inputs = [
        pa.RecordBatch.from_pydict({"k": keys[:600], "n": list(range(600))}),
        pa.RecordBatch.from_pydict({"k": keys[600:], "n": list(range(600, 1000))}),
    ]
    settings: dict[str, Any] = {
        "how": how, "on_error": policy, "capacity": 512, "max_batch": 100, "timeout": None,
    }  # fmt: skip
    columnar = plan(source, **settings)
    per_row = plan(RowByRow(source), **settings)
    assert isinstance(columnar.engine([inputs[0].column(0)]), ColumnarLane)
    assert not isinstance(per_row.engine([inputs[0].column(0)]), ColumnarLane)
    got = rows(enrich_batches(columnar, iter(inputs)))
    assert got == rows(enrich_batches(per_row, iter(inputs)))
    by_key = {row["k"]: row for row in got}
    assert by_key["u11"]["name"] == "elf" and by_key["u21"]["score"] == 5.25
    if policy == "error_column":
        assert "field 'age'" in by_key["u9"]["enrich_error"]
