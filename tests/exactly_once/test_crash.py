"""Exactly-once under SIGKILL: the job (redis-stream -> lookup_join -> sink) runs as its own
spark-submit process, is killed at chosen and random moments, restarted from its
checkpoint, and the sink must hold every record once, with no staging left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.crash_harness import Harness

pytest.importorskip("pyspark", reason="the crash tests need pyspark")

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1500)]


def check(harness: Harness) -> None:
    report = harness.run()
    print(report.summary())
    assert report.violations == []
    assert (report.duplicates, report.losses) == (0, 0)
    assert report.records == harness.orders
    assert report.kills >= 1, "no kill landed: the scenario proved nothing"


@pytest.mark.parametrize("seed", [11, 12])
def test_transactional_sink_survives_kills(tmp_path: Path, seed: int) -> None:
    check(Harness(tmp_path, "transactional", seed, kills=2, orders=150))


def test_transactional_sink_survives_a_kill_between_write_and_commit(tmp_path: Path) -> None:
    harness = Harness(tmp_path, "transactional", 5, kills=0, orders=120)
    harness.kills = 1
    harness.rng.choice = lambda points: "before_commit"  # type: ignore[method-assign]
    check(harness)


def test_idempotent_sink_survives_kills(tmp_path: Path) -> None:
    check(Harness(tmp_path, "idempotent", 21, kills=1, orders=150))


def test_spark_file_sink_survives_kills(tmp_path: Path) -> None:
    check(Harness(tmp_path, "file", 31, kills=1, orders=150))


def test_dimension_redis_restarted_mid_run(tmp_path: Path) -> None:
    check(Harness(tmp_path, "transactional", 41, kills=1, orders=150, restart_dimension=True))
