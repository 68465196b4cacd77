"""Job configs for Flink's lookup options: a full cache, key affinity (shuffle), SQL
table functions (lookup_joins); and the example that runs the SQL join."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import enrich
from jobs import _config, sql_job
from jobs._files import ConfigError
from tests.jobs.test_examples import EXAMPLES, orders, services

__all__ = ("services",)

STORES = {
    "users": {
        "kind": "redis",
        "url": "redis://dim:6379/0",
        "key_template": "user:{}",
        "value": "json",
        "schema": "name string",
    }
}


def test_full_cache_shuffle_and_lookup_joins_become_settings() -> None:
    config = _config.parse(
        {
            "stores": STORES,
            "joins": [
                {
                    "store": "users",
                    "on": "user_id",
                    "shuffle": True,
                    "cache": {"kind": "full", "reload_at": "03:00", "max_rows": 5000},
                }
            ],
            "lookup_joins": {
                "users_join": {"store": "users", "on": "user_id", "cache": {"max_rows": 10}}
            },
        }
    )
    [join] = config.joins
    assert join["shuffle"] is True
    assert isinstance(join["cache"], enrich.FullCache)
    assert (join["cache"].reload_at, join["cache"].max_rows) == ("03:00", 5000)
    users_join = config.lookup_joins["users_join"]
    assert isinstance(users_join["cache"], enrich.LookupCache)


@pytest.mark.parametrize(
    ("join", "message"),
    [
        ({"shuffle": 0}, "shuffle must be true, false or a partition count"),
        ({"cache": {"kind": "everything"}}, "cache.kind must be 'partial' or 'full'"),
        ({"cache": {"kind": "full", "reload_interval": -1}}, "reload_interval must be"),
    ],
)
def test_mistakes_are_named(join: dict[str, Any], message: str) -> None:
    raw = {"stores": STORES, "joins": [{"store": "users", "on": "user_id", **join}]}
    with pytest.raises(ConfigError, match=message):
        _config.parse(raw)


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_the_sql_join_example(spark: Any, services: Path) -> None:
    config = _config.load(EXAMPLES / "sql_join.yaml")
    result = sql_job.run(spark, config, (EXAMPLES / "sql_join.sql").read_text())
    assert result.columns == ["order_id", "user_id", "amount", "name", "tier", "enrich_error"]
    rows = result.collect()
    assert len(rows) == len(orders())
    by_id = {r["order_id"]: r for r in rows}
    assert (by_id[1001]["name"], by_id[1001]["tier"]) == ("user-1", "silver")
    assert by_id[1008]["name"] is None and by_id[1009]["user_id"] is None
