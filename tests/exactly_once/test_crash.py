"""Exactly-once under SIGKILL: the job (redis-stream -> lookup_join -> sink) runs as its own
spark-submit process, is killed at chosen and random moments, restarted from its
checkpoint, and the sink must hold every record once, with no staging left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.crash_harness import Harness, Report

pytest.importorskip("pyspark", reason="the crash tests need pyspark")

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1500)]


def check(harness: Harness) -> Report:
    report = harness.run()
    print(report.summary())
    assert report.violations == []
    assert (report.duplicates, report.losses) == (0, 0)
    assert report.records == harness.orders
    assert report.kills >= 1, "no kill landed: the scenario proved nothing"
    return report


def test_transactional_sink_survives_a_kill_at_each_point_of_its_commit(tmp_path: Path) -> None:
    """One kill at each point of a batch's commit, in one job's life: between the batch's
    writes and its commit (the staged rows must stay invisible: the harness checks), a
    machine crash with part of a batch published (a plan with a cursor left in Redis: the
    driver's process group and Spark's Python daemons' groups, recorded from the job's
    process tree, are killed at once, so the commit cannot finish its step after the JVM
    died; a plan must be left: the harness checks), and after the commit took effect but
    before Spark recorded it. Each restarted query replays the batch: its commit skips
    what was published and resumes the plan."""
    points = ("before_commit", "between_steps", "after_commit")
    harness = Harness(
        tmp_path, "transactional", 5, orders=200, plan=points, machine_crash_at=("between_steps",)
    )
    report = check(harness)
    assert report.kills == len(points)
    assert len(report.machine) == 1 and "Python groups []" not in report.machine[0]


@pytest.mark.soak
@pytest.mark.parametrize("seed", [11, 12])
def test_transactional_sink_survives_kills(tmp_path: Path, seed: int) -> None:
    check(Harness(tmp_path, "transactional", seed, kills=2, orders=150))


@pytest.mark.parametrize("persistence", ["volatile", "persistent"])
def test_sink_redis_restarted_between_staging_and_commit(tmp_path: Path, persistence: str) -> None:
    """Volatile: the commit finds batch 0's staging gone, fails with StagingMismatch
    publishing nothing, and the restarted query stages and publishes the batch again.
    Persistent (restarted between two publish steps): the publish goes on from the
    cursor Redis kept."""
    harness = Harness(tmp_path, "transactional", 7, kills=0, orders=120, sink_restart=persistence)
    report = harness.run()
    print(report.summary())
    assert report.violations == []
    assert (report.duplicates, report.losses, report.records) == (0, 0, harness.orders)
    assert report.restarts == 1
    if persistence == "volatile":
        log = (tmp_path / "job.log").read_text(errors="replace")
        assert "batch 0 not committed, nothing published" in log


@pytest.mark.soak
def test_idempotent_sink_survives_kills(tmp_path: Path) -> None:
    check(Harness(tmp_path, "idempotent", 21, kills=1, orders=150))


@pytest.mark.soak
def test_spark_file_sink_survives_kills(tmp_path: Path) -> None:
    check(Harness(tmp_path, "file", 31, kills=1, orders=150))


@pytest.mark.soak
def test_dimension_redis_restarted_mid_run(tmp_path: Path) -> None:
    check(Harness(tmp_path, "transactional", 41, kills=1, orders=150, restart_dimension=True))


@pytest.mark.soak
@pytest.mark.parametrize("seed", [51, 52])
def test_low_latency_profile_survives_kills_with_batches_re_cut(tmp_path: Path, seed: int) -> None:
    """Async progress tracking, the sink keyed by stream_id: each restart draws another
    maxEntriesPerTrigger and Spark re-plans the batches after the last offsets it wrote,
    so batch ids come back with other rows; each order must still land once."""
    check(Harness(tmp_path, "low-latency", seed, kills=2, orders=300))


@pytest.mark.soak
@pytest.mark.parametrize("seed", [61, 62])
def test_kafka_low_latency_survives_kills_with_batches_re_cut(tmp_path: Path, seed: int) -> None:
    """From Kafka (a topic of 3 partitions, the project's broker) under the profile: the
    sink keys each record by (topic, partition) and offset; each restart draws another
    maxOffsetsPerTrigger and Spark re-plans the batches after the last offsets it wrote;
    each order must still land once."""
    check(Harness(tmp_path, "kafka-low-latency", seed, kills=2, orders=300))


@pytest.mark.soak
@pytest.mark.parametrize("seed", [61, 62])
def test_low_latency_profile_survives_machine_crashes(tmp_path: Path, seed: int) -> None:
    """Half the kills are machine crashes (the Python daemons die with the driver)."""
    harness = Harness(tmp_path, "low-latency", seed, kills=4, orders=300, machine_crash=0.5)
    check(harness)
