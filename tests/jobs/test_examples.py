"""Every config in examples/ runs as it is, against the demo's data on real servers.

The examples name `enrich dim-server`'s ports by default; here ENRICH_REDIS_URL and
ENRICH_DIMENSION_URL point them at this session's servers, as the README says one may.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from enrich.demo.local import dimension_service, seed_redis
from jobs import _config, enrich_job, sql_job
from tests.spark.conftest import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def services(
    redis_server: Any, redis_client: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Path]:
    seed_redis(redis_server.url)
    with dimension_service(users=1_000) as base:
        monkeypatch.setenv("ENRICH_REDIS_URL", redis_server.url)
        monkeypatch.setenv("ENRICH_DIMENSION_URL", base)
        monkeypatch.setenv("ENRICH_OUT", str(tmp_path))
        monkeypatch.chdir(ROOT)  # the examples' data paths are relative to the repository
        yield tmp_path


def orders() -> list[dict[str, Any]]:
    lines = (EXAMPLES / "data/orders/orders-0001.json").read_text().splitlines()
    return [json.loads(line) for line in lines]


def input_rows(query: Any) -> int:
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def test_files_with_dead_letter(spark: Any, services: Path) -> None:
    config = _config.load(EXAMPLES / "files_with_dead_letter.yaml")
    query = enrich_job.run(spark, config)
    assert query.exception() is None
    enriched = spark.read.parquet(str(services / "enriched")).collect()
    failed = spark.read.json(str(services / "dead-letter")).collect()
    # Every order lands in exactly one place; user 13's broken value sends its orders to
    # the dead letter, with the reason.
    expected = orders()
    assert len(enriched) + len(failed) == len(expected)
    assert sorted(r["order_id"] for r in failed) == sorted(
        o["order_id"] for o in expected if o["user_id"] == 13
    )
    assert all(r["enrich_error"].startswith("join_0: decode:") for r in failed)
    names = {r["order_id"]: r["name"] for r in enriched}
    assert names[1001] == "user-1" and names[1008] is None  # a hit, a miss
    assert "enrich_error" not in spark.read.parquet(str(services / "enriched")).columns


def test_http_batch(spark: Any, services: Path) -> None:
    query = enrich_job.run(spark, _config.load(EXAMPLES / "http_batch.toml"))
    assert query.exception() is None
    assert input_rows(query) == len(orders())


def test_rate_to_console(spark: Any, services: Path) -> None:
    query = enrich_job.run(spark, _config.load(EXAMPLES / "rate_to_console.yaml"), duration=20)
    assert query.exception() is None
    assert not query.isActive
    assert input_rows(query) > 0


def test_sql_lookups(spark: Any, services: Path) -> None:
    config = _config.load(EXAMPLES / "sql_lookups.yaml")
    result = sql_job.run(spark, config, (EXAMPLES / "enrich.sql").read_text())
    rows = {r["order_id"]: r for r in result.collect()}
    assert len(rows) == len(orders())
    assert (rows[1001]["name"], rows[1001]["tier"]) == ("user-1", "silver")
    assert rows[1008]["name"] is None and rows[1009]["user_id"] is None


def expected_score(order: dict[str, Any]) -> dict[str, Any]:
    from enrich.demo.scoring import score

    return score({k: order[k] for k in ("order_id", "user_id", "amount")})


def test_score_orders(spark: Any, services: Path) -> None:
    query = enrich_job.run(spark, _config.load(EXAMPLES / "score_orders.yaml"))
    assert query.exception() is None
    scored = {r["order_id"]: r for r in spark.read.parquet(str(services / "scored")).collect()}
    failed = spark.read.json(str(services / "scored-dead-letter")).collect()
    # Every order once: scored, or in the dead letter (user 13's lookup fails) with why.
    assert len(scored) + len(failed) == len(orders())
    assert all(r["enrich_error"].startswith("join_0: decode:") for r in failed)
    for order in orders():
        if order["order_id"] in scored:
            got = scored[order["order_id"]]
            assert (got["score"], got["label"]) == tuple(expected_score(order).values())


def test_score_batches(spark: Any, services: Path) -> None:
    from enrich.spark import statistics

    enrich_job.run(spark, _config.load(EXAMPLES / "score_batches.yaml"))
    rows = spark.read.parquet(str(services / "scored-batches")).collect()
    assert sorted((r["order_id"], r["score"], r["label"]) for r in rows) == sorted(
        (o["order_id"], *expected_score(o).values()) for o in orders()
    )
    metrics = statistics("map_0")
    assert metrics.rows_out >= len(orders()) and not metrics.errors
    assert metrics.keys_per_request > 1  # rows went in batches


def test_sql_score(spark: Any, services: Path) -> None:
    config = _config.load(EXAMPLES / "sql_score.yaml")
    result = sql_job.run(spark, config, (EXAMPLES / "score.sql").read_text())
    rows = {r["order_id"]: r for r in result.collect()}
    assert len(rows) == len(orders())
    for order in orders():
        got = rows[order["order_id"]]
        assert (got["score"], got["label"]) == tuple(expected_score(order).values())
        assert got["error"] is None
