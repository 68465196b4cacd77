"""kafka -> lookup_join -> kafka-eos survives SIGKILLs of its whole process group (the
driver, the JVM, Spark's Python daemon and workers) and restarts whose batches are cut
otherwise: a read_committed consumer finds each order once. A soak scenario (several
minutes: every restart starts a driver); ``python -m tests.exactly_once.kafka_crash``
runs more."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.exactly_once.kafka_crash import one_run

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.soak, pytest.mark.timeout(1500)]


def test_kafka_eos_survives_machine_crashes_and_re_cut_restarts(tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    kills, lost, doubled = one_run(tmp_path, seed=44, kills=2, orders=300)
    assert kills >= 1
    assert (lost, doubled) == (0, 0)


def test_kafka_eos_survives_a_broker_restart_mid_commit(tmp_path: Path) -> None:
    """The broker restarted while the job commits transactions, and a machine crash."""
    pytest.importorskip("confluent_kafka")
    kills, lost, doubled = one_run(tmp_path, seed=45, kills=1, orders=300, broker_restarts=1)
    assert kills >= 1
    assert (lost, doubled) == (0, 0)
